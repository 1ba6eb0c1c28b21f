# Channels are not bound in R yet: an endpoint that arrives (a ref of kind 0x41, docs/wire-format.md)
# is refused by name, not misread as a shared array.

test_that("a channel endpoint is refused by name", {
  word <- function(...) as.raw(c(...))
  name <- charToRaw("/suiro_1_2_ch3")
  bytes <- c(charToRaw("SUIRO"), word(1, 0, 0),      # header, version 1
             word(0x13, 0x41, 0, 0, 0, 0, 0, 0),     # ref, kind 0x41 (channel), ndim 0
             word(7, 0, 0, 0, 0, 0, 0, 0),           # flags: the token
             raw(8), raw(8),                         # order 0, offset 0
             word(1, 0, 0, 0, 0, 0, 0, 0),           # length 1: the receiving end
             word(6, 0, length(name), 0, 0, 0, 0, 0), name, raw(2))
  expect_error(suiro_wire_decode(bytes), "a channel endpoint was received, but this language does not bind channels yet")
})

# What crosses between R processes: every R object, exactly (rich encoding), and the portable
# mapping that other languages see (strict encoding), checked through the codec directly.

roundtrip <- function(p, x) suiro_collect(suiro_submit(p, function(v) v, x), timeout = 10)

test_that("between R processes every object crosses exactly", {
  p <- local_pool(workers = 1)
  df <- data.frame(
    lgl = c(TRUE, NA, FALSE), int = c(1L, NA, 3L), dbl = c(0.5, NA, NaN), chr = c("a", NA, "c"),
    cplx = c(1i, NA, 2), fct = factor(c("a", NA, "b")), ord = factor(c("x", "y", NA), ordered = TRUE),
    date = as.Date(c(NA, "2000-01-01", "2024-02-29")),
    when = as.POSIXct(c("2024-01-01 00:00:00", NA, "2000-06-01 12:30:00"), tz = "Europe/Warsaw"),
    stringsAsFactors = FALSE)
  df$raw <- as.raw(1:3)
  df$big <- structure(c(1, NA, 3), class = "integer64")
  objs <- list(
    NULL, NA, 1L, NA_integer_, 2.5, NA_real_, "x", NA_character_, 1i, as.raw(1:3),
    c(a = 1, b = 2), structure(1:3, class = "myclass", extra = list(k = "v")),
    matrix(1:6, 2, dimnames = list(c("r1", "r2"), c("a", "b", "c"))), array(as.numeric(1:24), 2:4),
    list(1, "a", list(b = TRUE)), list(a = 1, 2), setNames(list(1, 2), c("", "x")),
    df, data.frame(x = 1:2, row.names = c("a", "b")), df[c(3, 1), ],
    y ~ x + log(z), quote(a + b), as.name("sym"), expression(1 + 2),
    function(x) x + 1, new.env(), Sys.Date(), Sys.time(), as.POSIXct("2024-01-01", tz = "UTC"),
    factor(character(0)), character(0), integer(0), list(), structure(list(), names = character(0)))
  for (i in seq_along(objs)) {
    got <- roundtrip(p, objs[i])
    if (is.environment(objs[[i]])) {
      expect_true(is.environment(got[[1]]))
    } else if (inherits(objs[[i]], "formula")) {
      expect_identical(format(got[[1]]), format(objs[[i]]))
      expect_s3_class(got[[1]], "formula") # its environment is a copy
    } else if (is.function(objs[[i]])) {
      expect_identical(got[[1]](1), 2)
    } else {
      expect_identical(got, objs[i], label = paste("object", i))
    }
  }
  expect_identical(roundtrip(p, df), df)
})

test_that("integers, doubles and logicals keep their types in both directions", {
  p <- local_pool(workers = 1)
  expect_identical(roundtrip(p, 5L), 5L)
  expect_identical(roundtrip(p, 5), 5)
  expect_identical(roundtrip(p, TRUE), TRUE)
  expect_identical(roundtrip(p, c(5L, 6L)), c(5L, 6L))
  expect_identical(roundtrip(p, -.Machine$integer.max), -.Machine$integer.max)
  expect_identical(roundtrip(p, 2^60), 2^60)
  expect_identical(roundtrip(p, structure(c(i64_bits("-9223372036854775807")), class = "integer64")),
                   structure(c(i64_bits("-9223372036854775807")), class = "integer64"))
})

test_that("the portable mapping: what other languages see", {
  dec <- function(x) suiro_wire_decode(suiro_wire_encode(x))
  # scalars and vectors
  expect_identical(dec(1L), 1L)
  expect_identical(dec(c(1L, NA)), c(1L, NA))
  expect_identical(dec(NA_integer_), NA_integer_)
  expect_identical(dec("é"), "é")
  expect_identical(Encoding(dec("é")), "UTF-8")
  latin <- iconv("caf\u00e9", "UTF-8", "latin1")
  expect_identical(dec(latin), "caf\u00e9")
  # named lists are dicts, unnamed lists are lists
  expect_identical(dec(list(a = 1, b = list(2, "x"))), list(a = 1, b = list(2, "x")))
  # factors, dates, times, integer64, matrices, frames
  f <- factor(c("b", NA, "a"), levels = c("b", "a"))
  expect_identical(dec(f), f)
  expect_identical(dec(as.Date("2024-03-01")), as.Date("2024-03-01"))
  t <- as.POSIXct("2024-03-01 10:00:00", tz = "America/New_York")
  expect_identical(dec(t), t)
  m <- matrix(c(TRUE, NA, FALSE, TRUE), 2)
  expect_identical(dec(m), m)
  df <- data.frame(a = 1:2, b = c("x", "y"))
  expect_identical(dec(df), df)
  # the forms other languages cannot take
  expect_error(suiro_wire_encode(c(a = 1)), "value: a named double vector cannot be sent")
  expect_error(suiro_wire_encode(list(x = matrix(1:4, 2, dimnames = list(NULL, c("a", "b"))))),
               "value\\[\\['x'\\]\\]: a matrix with dimnames")
  expect_error(suiro_wire_encode(list(structure(1, class = "foo"))), "class \"foo\"")
  expect_error(suiro_wire_encode(data.frame(x = I(list(1, 2)))), "value\\$x: a column of class \"AsIs\"")
  expect_error(suiro_wire_encode(list(a = list(b = quote(x)))), "value\\[\\['a'\\]\\]\\[\\['b'\\]\\]: a symbol")
  expect_error(suiro_wire_encode(Reduce(function(a, b) list(a), 1:70, 1)), "nested more than 64")
  # rich mode takes them all
  expect_identical(suiro_wire_decode(suiro_wire_encode(c(a = 1), rich = TRUE), trusted = TRUE), c(a = 1))
})

test_that("R-serialized payloads are refused unless an R process wrote them (trusted = TRUE)", {
  x <- list(e = quote(a + b), s = structure(1, class = "foo"), f = function(x) x + 1)
  rich <- suiro_wire_encode(x, rich = TRUE)
  expect_error(suiro_wire_decode(rich), "from bytes given to suiro_wire_decode .*is refused")
  v <- suiro_wire_decode(rich, trusted = TRUE)
  expect_identical(v$e, quote(a + b))
  expect_identical(v$s, structure(1, class = "foo"))
  # trusted bytes are still checked: attributes as an unnamed list are refused, naming them
  b <- suiro_wire_encode(structure(1, foo = 2), rich = TRUE)
  expect_identical(b[65:67], as.raw(c(0x0c, 0x00, 0x01))) # the attributes: a DICT of 1 entry
  b[65] <- as.raw(0x0b) # becomes a LIST of 2 items
  b[67] <- as.raw(2)
  expect_error(suiro_wire_decode(b, trusted = TRUE), "malformed attributes")
  # crafted serialize() bytes (corrupted at random after R's header) never reach unserialize()
  ser <- suiro_wire_encode(quote(a + b), rich = TRUE)
  at <- which(ser == as.raw(0x42) & c(ser[-1], as.raw(0)) == as.raw(0x0a))[1] # "B\n" (native binary)
  expect_false(is.na(at))
  set.seed(5)
  for (i in 1:50) {
    bad <- ser
    k <- sample(seq(at + 2L, length(bad)), 4)
    bad[k] <- as.raw(sample(0:255, 4))
    expect_error(suiro_wire_decode(bad), "is refused|cannot decode")
  }
})

test_that("malformed and hostile bytes are refused with the byte they are at", {
  expect_error(suiro_wire_decode(as.raw(c(0x53, 0x55, 0x49, 0x52, 0x4f, 1, 0, 0, 0x3f, 0, 0, 0, 0, 0, 0, 0))),
               "bad tag 0x3f at byte 8")
  expect_error(suiro_wire_decode(as.raw(1:7)), "cannot decode")
  expect_error(suiro_wire_decode(as.raw(c(0x53, 0x55, 0x49, 0x52, 0x4f, 2, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0))), "version 2")
  expect_error(suiro_wire_decode(1:3), "argument 1 must be a raw vector")
  # random corruption of valid buffers never crashes
  set.seed(1)
  good <- suiro_wire_encode(list(a = c(1, 2, 3), b = "text", c = list(TRUE, NULL, 1:3)))
  for (i in 1:300) {
    bad <- good
    k <- sample(length(bad), 3)
    bad[k] <- as.raw(sample(0:255, 3))
    r <- tryCatch(suiro_wire_decode(bad), error = function(e) "refused")
    expect_true(identical(r, "refused") || is.list(r))
  }
})

test_that("i64 timestamps read as POSIXct that remember their unit, exactly or refused", {
  ts_bytes <- function(tokens, unit, tz = "")
    suiro_wire_encode(suiro_typed(as_i64(tokens), "i64", form = "timestamp", unit = unit, tz = tz))
  elt_type <- function(bytes) as.integer(bytes[10]) # the timestamp item's aux: 1 f64, 3 i64
  for (case in list(list(c("1704110400", "na", "-1"), "s"), list(c("1704110400123", "0"), "ms"),
                    list(c("1704110400123456", "na", "-1"), "us"),
                    list(c("1704110400123456000", "-1000", "na"), "ns"))) {
    for (tz in c("", "UTC")) {
      b <- ts_bytes(case[[1]], case[[2]], tz)
      x <- suiro_wire_decode(b)
      expect_s3_class(x, "POSIXct")
      expect_identical(attr(x, "suiro_unit"), case[[2]])
      expect_identical(attr(x, "tzone"), if (nzchar(tz)) tz) # the zone "" is no tzone
      expect_identical(suiro_wire_encode(x), b, label = paste(case[[2]], tz, "re-encodes"))
    }
  }
  x <- suiro_wire_decode(ts_bytes(c("1704110400123456000", "na"), "ns", "UTC"))
  expect_identical(unclass(x)[1], 1704110400.123456)
  expect_identical(format(x[1], digits = 6), "2024-01-01 12:00:00.123456")
  expect_identical(elt_type(suiro_wire_encode(x + 1)), 3L) # whole microseconds still
  expect_identical(elt_type(suiro_wire_encode(x + 5e-7)), 1L) # between two: f64 seconds hold it
  expect_identical(as.numeric(suiro_wire_decode(suiro_wire_encode(x + 5e-7))), as.numeric(x + 5e-7)) # same doubles
  s <- suiro_wire_decode(ts_bytes("1704110400", "s"))
  expect_identical(elt_type(suiro_wire_encode(s + 0.5)), 1L)
  expect_error(suiro_wire_decode(ts_bytes(c("0", "1700000000123456789"), "ns")),
               "timestamp 2 \\(1700000000123456789 ns\\) has a sub-microsecond part, which R's POSIXct")
  expect_error(suiro_wire_decode(ts_bytes("9007199254740993", "s")), "beyond what R's POSIXct")
  expect_error(suiro_wire_decode(ts_bytes("9223372036854775000", "us")), "beyond what R's POSIXct")
})

test_that("a POSIXct without tzone comes back without it; tzone \"\" as none", {
  none <- structure(1704110400.25, class = c("POSIXct", "POSIXt"))
  expect_identical(suiro_wire_decode(suiro_wire_encode(none)), none)
  empty <- as.POSIXct("2024-01-02 03:04:05")
  expect_identical(attr(empty, "tzone"), "")
  back <- suiro_wire_decode(suiro_wire_encode(empty))
  expect_null(attr(back, "tzone"))
  expect_identical(format(back), format(empty)) # the same time to R
  # between R processes both keep their attributes
  expect_identical(suiro_wire_decode(suiro_wire_encode(empty, rich = TRUE), trusted = TRUE), empty)
  expect_identical(suiro_wire_decode(suiro_wire_encode(none, rich = TRUE), trusted = TRUE), none)
})

test_that("refusals say \"an\" before a vowel", {
  expect_error(suiro_wire_encode(structure(1:3, note = "x")), "value: an integer vector with attribute 'note'")
  expect_error(suiro_wire_encode(structure(1, note = "x")), "value: a double vector with attribute 'note'")
})

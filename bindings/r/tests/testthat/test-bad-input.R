# Hostile counts: a few bytes that claim billions of elements, and constructors given huge
# counts. Each case runs in a child R whose address space is limited to 1 GB (ulimit -v; under
# AddressSanitizer, which needs a large address space, its allocation cap of 1 GB instead), so
# an expansion that the code forgot to refuse fails the case (R cannot allocate) instead of
# filling the machine; every case is bounded in time by the child's timeout.

run_limited <- function(code, limit_mb = 1024, seconds = 120) {
  f <- tempfile(fileext = ".R")
  on.exit(unlink(f))
  writeLines(code, f)
  libs <- paste(.libPaths(), collapse = ":")
  limit <- if (grepl("libasan", Sys.getenv("LD_PRELOAD"), fixed = TRUE)) {
    sprintf("export ASAN_OPTIONS=%s:max_allocation_size_mb=%d:allocator_may_return_null=1;",
            shQuote(Sys.getenv("ASAN_OPTIONS")), as.integer(limit_mb))
  } else {
    sprintf("ulimit -v %d;", as.integer(limit_mb * 1024))
  }
  cmd <- sprintf("%s R_LIBS=%s exec timeout -k 5 %d %s --vanilla %s 2>&1", limit,
                 shQuote(libs), as.integer(seconds), shQuote(file.path(R.home("bin"), "Rscript")), shQuote(f))
  suppressWarnings(system2("bash", c("-c", shQuote(cmd)), stdout = TRUE))
}

# The cases: each prints "CASE name: <outcome>"; "refused: <message>" when it signals.
bad_input_cases <- '
suppressPackageStartupMessages(library(suiro))
case <- function(name, expr) {
  out <- tryCatch(expr, error = function(e) paste("refused:", conditionMessage(e)))
  cat(sprintf("CASE %s: %s\\n", name, paste(out, collapse = " ")))
}
enc <- function(x) suiro_wire_encode(x)
dec <- function(b) suiro_wire_decode(b)
range_of <- function(start, step, n) enc(suiro_typed(c(start, step, n), "i64", form = "range"))
# sets the 48-bit count of the item word at byte `at` (1-based) of b
put_n <- function(b, at, n) {
  for (k in 0:5) { b[at + 2 + k] <- as.raw(n %% 256); n <- n %/% 256 }
  b
}
put_u64 <- function(b, at, n) {
  for (k in 0:7) { b[at + k] <- as.raw(n %% 256); n <- n %/% 256 }
  b
}
case("range 2^31 step 1", { x <- dec(range_of(0, 1, 2^31)); c(typeof(x), length(x), x[1], x[2^31]) })
case("range 2^40 step 1", { x <- dec(range_of(0, 1, 2^40)); c(typeof(x), length(x), x[2^40] == 2^40 - 1) })
case("range 2^31 step -1", { x <- dec(range_of(10, -1, 2^31)); c(typeof(x), length(x), x[1], x[2^31]) })
case("range 2^31 step 2", { x <- dec(range_of(0, 2, 2^31)); length(x) })
case("range 1000 step 3", identical(dec(range_of(5, 3, 1000)), as.integer(seq(5, by = 3, length.out = 1000))))
case("range 10 step 1", identical(dec(range_of(1, 1, 10)), 1:10))
case("list of 2^48-1 items", length(dec(put_n(enc(list(1)), 9, 2^48 - 1))))
case("dict of 2^40 entries", length(dec(put_n(enc(list(a = 1)), 9, 2^40))))
case("strs of 2^40 strings", length(dec(put_n(enc(c("a", "b")), 9, 2^40))))
case("f64 array of 2^40", length(dec(put_n(enc(c(1, 2)), 9, 2^40))))
case("frame of 2^40 columns", length(dec(put_n(enc(data.frame(a = 1)), 9, 2^40))))
case("frame of 2^31 rows", nrow(dec(put_u64(enc(data.frame()), 17, 2^31))))
case("frame of 2^31-1 rows", nrow(dec(put_u64(enc(data.frame()), 17, 2^31 - 1))))
case("factor of 2^40 codes", length(dec(put_n(enc(factor(c("a", "b"))), 9, 2^40))))
case("range constructor 2^60", length(range_of(0, 1, 2^60)))
case("ndarray constructor 2^31 x 2^31", length(enc(suiro_typed(1:4, "i32", form = "ndarray", shape = c(2^31, 2^31)))))
case("ndarray constructor shape 3 of 4", length(enc(suiro_typed(1:4, "i32", form = "ndarray", shape = 3))))
case("typed i64 scalar of 3", length(enc(suiro_typed(c(1, 2, 3), "i64", form = "scalar"))))
# crafted serialize() bytes: a length field of 2^31-1 elements after the header of R
ser <- suiro_wire_encode(quote(a + b), rich = TRUE)
at <- which(ser == as.raw(0x42) & c(ser[-1], as.raw(0)) == as.raw(0x0a))[1]
crafted <- ser
crafted[(at + 2L):(at + 9L)] <- as.raw(c(0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f))
case("crafted serialize bytes", class(dec(crafted)))
cat("CASES DONE\\n")
'

test_that("huge counts in bytes and constructors are refused or stay compact, within 1 GB", {
  out <- run_limited(bad_input_cases)
  expect_true("CASES DONE" %in% out, label = paste(tail(out, 5), collapse = "\n"))
  got <- function(name) {
    l <- grep(paste0("^CASE ", name, ": "), out, value = TRUE, fixed = FALSE)
    if (!length(l)) return(NA_character_)
    sub("^CASE [^:]*: ", "", l[1])
  }
  # steps of 1 and -1: R's compact sequences, not 8 GB vectors
  expect_identical(got("range 2\\^31 step 1"), "integer 2147483648 0 2147483647")
  expect_identical(got("range 2\\^40 step 1"), "double 1099511627776 TRUE")
  expect_identical(got("range 2\\^31 step -1"), "integer 2147483648 10 -2147483637")
  # other steps expand only up to a limit
  expect_match(got("range 2\\^31 step 2"), "^refused: .*a range of 2147483648 elements with step 2 .*only ranges with step 1 or -1")
  expect_identical(got("range 1000 step 3"), "TRUE")
  expect_identical(got("range 10 step 1"), "TRUE")
  # counts that the bytes cannot hold
  for (name in c("list of 2\\^48-1 items", "dict of 2\\^40 entries", "strs of 2\\^40 strings", "f64 array of 2\\^40",
                 "frame of 2\\^40 columns", "factor of 2\\^40 codes"))
    expect_match(got(name), "^refused: cannot decode the value: wire: ", label = name)
  expect_match(got("frame of 2\\^31 rows"), "^refused: .*2147483648 rows is more than R allows")
  expect_identical(got("frame of 2\\^31-1 rows"), "2147483647") # compact row names
  # constructors check their counts before writing anything
  expect_match(got("range constructor 2\\^60"), "^refused: ")
  expect_match(got("ndarray constructor 2\\^31 x 2\\^31"), "^refused: ")
  expect_match(got("ndarray constructor shape 3 of 4"), "^refused: ")
  expect_match(got("typed i64 scalar of 3"), "^refused: ")
  # R-serialized bytes from anywhere but an R process of the family never reach unserialize()
  expect_match(got("crafted serialize bytes"), "^refused: .*from bytes given to suiro_wire_decode .*is refused")
})

# issue 18 item 8: at 63 levels the writer refused "a i64 at depth 65" with no path
test_that("values nested past the wire's limit are refused naming the path, in one line", {
  p <- local_pool(workers = 1) # a sanitizer run's runtime reaches the worker too
  nest <- function(n) { x <- 1; for (i in seq_len(n)) x <- list(x); x }
  expect_equal(suiro_collect(suiro_submit(p, function(x) 1, nest(62)), timeout = 30), 1)
  for (d in c(63, 64, 500)) {
    err <- tryCatch(suiro_submit(p, function(x) 1, nest(d)), error = function(e) e)
    expect_s3_class(err, "error")
    msg <- conditionMessage(err)
    expect_match(msg, "argument 3[[1]][[1]]", fixed = TRUE)
    expect_match(msg, "...[[1]][[1]][[1]][[1]]: nested more than 64 levels deep", fixed = TRUE)
    expect_lt(nchar(msg), 300)
  }
})

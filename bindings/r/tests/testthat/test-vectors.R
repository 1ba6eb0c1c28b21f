# The golden vectors of tests/vectors (docs/wire-format.md section 9): every one decodes to the
# value its .txt describes under R's mapping, and the R value that expresses that wire value
# (suiro_typed() for the forms R has no type for) encodes to the same bytes; every truncation
# fails cleanly. What R cannot hold is refused: strings with NUL bytes, cycles; functions of
# other languages and references to regions decode to descriptors only when asked.

vectors <- function() {
  dir <- file.path(need_root(), "tests", "vectors")
  files <- sort(list.files(dir, pattern = "\\.bin$"))
  lapply(setNames(files, sub("\\.bin$", "", files)), function(f) {
    bin <- readBin(file.path(dir, f), "raw", file.size(file.path(dir, f)))
    list(bin = bin, txt = read_vector(file.path(dir, sub("\\.bin$", ".txt", f))))
  })
}

same_bits <- function(a, b) identical(a, b, num.eq = FALSE)

test_that("every golden vector decodes to its R value", {
  vs <- vectors()
  expect_gt(length(vs), 60)
  for (name in names(vs)) {
    v <- vs[[name]]
    if (v$txt$nul) {
      expect_error(suiro_wire_decode(v$bin), "NUL byte", label = name)
    } else if (name %in% c("backref_cycle", "func_recursive")) {
      expect_error(suiro_wire_decode(v$bin, describe = TRUE), "cycle", label = name)
    } else if (v$txt$sub_us) {
      expect_error(suiro_wire_decode(v$bin), "has a sub-microsecond part, which R's POSIXct", label = name)
    } else if (name == "backref_shared") {
      expect_identical(suiro_wire_decode(v$bin), list(list(a = 1L), list(a = 1L)))
    } else {
      got <- suiro_wire_decode(v$bin, describe = v$txt$describe, trusted = v$txt$r_only)
      expect_true(same_bits(got, v$txt$value), label = paste(name, "decodes to its value"))
    }
  }
})

test_that("the R form of every golden value encodes to its exact bytes", {
  vs <- vectors()
  n <- 0
  for (name in names(vs)) {
    v <- vs[[name]]
    if (v$txt$nul || v$txt$backref) next
    # the R-only forms: the value R decodes them to is the R form (sent to R receivers only)
    typed <- if (v$txt$r_only) suiro_wire_decode(v$bin, trusted = TRUE) else v$txt$typed
    expect_identical(suiro_wire_encode(typed, rich = v$txt$r_only), v$bin, label = paste(name, "re-encodes"))
    n <- n + 1
  }
  expect_gte(n, 60)
})

# What R does with each golden vector when it decodes it and encodes the result again, with no
# help (docs/wire-format.md, "R conventions", states the same). Every vector must have an entry:
#   "exact"      the same bytes come back
#   "described"  the same bytes come back from the descriptor (describe = TRUE: references,
#                functions of other languages)
#   "rich"       an R-only form: the same bytes come back between R processes (trusted, rich)
#   refused(re)  R refuses to decode it, with a message matching re
#   changed(why, is) R's mapping changes the form: the value passes `is`, R writes it back in the
#                form `why` names, and that reads back as the identical R value
refused <- function(re) list(kind = "refused", re = re)
changed <- function(why, is) list(kind = "changed", why = why, is = is)
r_outcomes <- list(
  nil = "exact", bool_true = "exact", bool_false = "exact", bool_na = "exact", i64_small = "exact",
  i64_negative = "exact", i64_extremes = "exact",
  i64_int48_edges = changed("integers beyond int32 and up to 2^53 read as double, written back as f64",
                            function(x) is.list(x) && any(vapply(x, is.double, NA))),
  f64_scalar = "exact", f64_values = "exact", f64_nan_na = "exact",
  str_hello = "exact", str_empty = "exact", str_utf8 = "exact", str_8 = "exact",
  str_nul = refused("NUL byte"),
  bytes_empty = "exact", bytes_data = "exact", strs = "exact", strs_empty = "exact", strs_all_na = "exact",
  array_f64 = "exact", array_i64 = "exact", array_i32 = "exact", array_bool = "exact", array_c128 = "exact",
  array_f32 = changed("f32 widens to double, written back as an f64 array", is.double),
  array_u8 = changed("u8 reads as raw, written back as bytes (raw below 32 KiB)", is.raw),
  array_u8_long = changed("u8 reads as raw, written back as bytes (raw below 32 KiB)", is.raw),
  array_empty = changed("empty arrays of every type read as zero-length vectors (f32 as double, u8 as raw)",
                        function(x) is.list(x) && all(lengths(x) == 0L)),
  nd_f64_f = "exact", nd_i32_3d_f = "exact",
  nd_f64_c = changed("C order is transposed on reading, written back in F order", is.matrix),
  nd_bool_c = changed("C order is transposed on reading, written back in F order", is.matrix),
  nd_0d = changed("a 0-d array reads as a length-1 vector, written back as a scalar",
                  function(x) is.double(x) && length(x) == 1L && is.null(dim(x))),
  nd_empty = changed("a C-order array with a zero extent reads as an R array, written back in F order",
                     function(x) length(x) == 0L && !is.null(dim(x))),
  list_empty = "exact", dict_empty = "exact", list_mixed = "exact", dict_record = "exact", nested = "exact",
  depth_64 = "exact",
  frame_all = refused("timestamp 3 \\(1700000000123456789 ns\\) has a sub-microsecond part"),
  frame_all_us = changed("the f32 column widens to double, written back as f64; every other column kind exact",
                         function(x) is.data.frame(x) && ncol(x) == 15L && is.double(x$ratio) &&
                           inherits(x$big, "integer64") && inherits(x$when_ns, "POSIXct") && is.raw(x$small)),
  frame_empty = "exact", frame_zero_rows = "exact", factor = "exact", factor_no_levels = "exact", date_f64 = "exact",
  timestamp_ms = "exact", timestamp_us_empty = "exact",
  error_plain = "exact", error_indexed = "exact", call_name = "exact", call_source = "exact", call_nested = "exact",
  ref_f64_2d = "described", ref_i32_vector = "described", ref_bytes = "described", ref_wire = "described",
  ref_frame_column = "described",
  func_by_name = "described", func_proto = "described", task_func = "described",
  func_recursive = refused("cycle"),
  func_r_relay = "rich",
  backref_shared = changed("shared containers are copied (R values cannot share), written back twice",
                           function(x) identical(x[[1]], x[[2]])),
  backref_cycle = refused("cycle"),
  task_args = "exact", task_args_f64 = "exact",
  range = changed("a range reads as an integer vector, written back as an i32 array", is.integer),
  range_parts = changed("ranges read as integer vectors, written back as i32 arrays",
                        function(x) is.list(x) && all(vapply(x, is.integer, NA)))
)

test_that("every golden vector goes out of R byte for byte or as R's stated mapping", {
  vs <- vectors()
  expect_setequal(setdiff(names(vs), names(r_outcomes)), character(0)) # each vector states what R does
  expect_setequal(setdiff(names(r_outcomes), names(vs)), character(0)) # and no stale entries
  for (name in names(vs)) {
    bin <- vs[[name]]$bin
    o <- r_outcomes[[name]]
    if (is.null(o)) {
      fail(sprintf("vector %s has no stated R outcome in r_outcomes (test-vectors.R)", name))
      next
    }
    if (identical(o, "exact")) {
      expect_identical(suiro_wire_encode(suiro_wire_decode(bin)), bin, label = paste(name, "(exact)"))
    } else if (identical(o, "described")) {
      expect_identical(suiro_wire_encode(suiro_wire_decode(bin, describe = TRUE)), bin, label = paste(name, "(described)"))
    } else if (identical(o, "rich")) {
      expect_error(suiro_wire_decode(bin), "R forms are accepted only from R processes", label = name)
      expect_identical(suiro_wire_encode(suiro_wire_decode(bin, trusted = TRUE), rich = TRUE), bin,
                       label = paste(name, "(rich)"))
    } else if (identical(o$kind, "refused")) {
      expect_error(suiro_wire_decode(bin, describe = TRUE), o$re, label = paste(name, "(refused)"))
    } else {
      x <- suiro_wire_decode(bin)
      expect_true(o$is(x), label = paste(name, "reads as", o$why))
      out <- suiro_wire_encode(x)
      expect_false(identical(out, bin), label = paste(name, "changes form (else state \"exact\")"))
      expect_true(identical(suiro_wire_decode(out), x, num.eq = FALSE), label = paste(name, "reads back the same"))
    }
  }
})

test_that("every truncation of every golden vector fails without a crash", {
  vs <- vectors()
  for (name in names(vs)) {
    bin <- vs[[name]]$bin
    for (k in unique(c(0, seq(8, length(bin) - 1, by = 8), length(bin) - 1))) {
      if (k >= length(bin)) next
      expect_error(suiro_wire_decode(bin[seq_len(k)], describe = TRUE), "cannot decode|wire", label = paste(name, k))
    }
  }
})

test_that("references and foreign functions are refused unless described", {
  vs <- vectors()
  expect_error(suiro_wire_decode(vs$ref_f64_2d$bin), "another pool family|region")
  expect_error(suiro_wire_decode(vs$func_proto$bin), "lua function")
})

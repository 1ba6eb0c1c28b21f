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

test_that("what R reads back unchanged goes out byte for byte", {
  # decode -> encode with no help: every vector whose R value is unambiguous
  vs <- vectors()
  exact <- c("nil", "bool_true", "bool_false", "bool_na", "i64_small", "i64_negative", "i64_extremes",
             "f64_scalar", "f64_values", "f64_nan_na", "str_hello", "str_empty", "str_utf8", "str_8",
             "bytes_empty", "bytes_data", "strs", "strs_all_na", "array_f64", "array_i64", "array_i32",
             "array_bool", "array_c128", "nd_f64_f", "nd_i32_3d_f", "list_empty", "dict_empty", "list_mixed",
             "dict_record", "nested", "depth_64", "factor", "factor_no_levels", "date_f64", "frame_empty",
             "frame_zero_rows", "error_plain", "error_indexed", "call_name", "call_source", "call_nested",
             "task_args", "task_args_f64")
  for (name in exact) {
    expect_identical(suiro_wire_encode(suiro_wire_decode(vs[[name]]$bin)), vs[[name]]$bin, label = name)
  }
  for (name in setdiff(grep("^(ref_|func_|task_func)", names(vs), value = TRUE), c("func_recursive", "func_r_relay"))) {
    expect_identical(suiro_wire_encode(suiro_wire_decode(vs[[name]]$bin, describe = TRUE)), vs[[name]]$bin, label = name)
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

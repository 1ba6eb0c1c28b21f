# Helpers shared by the tests.

# The suiro checkout (for tests/vectors, examples/ and the Lua worker): SUIRO_ROOT, or found
# above the working directory. NULL when the package is checked outside a checkout.
suiro_root <- function() {
  r <- Sys.getenv("SUIRO_ROOT")
  if (nzchar(r)) return(normalizePath(r))
  d <- normalizePath(getwd())
  repeat {
    if (file.exists(file.path(d, "engine", "include", "suiro_bind.h"))) return(d)
    up <- dirname(d)
    if (up == d) return(NULL)
    d <- up
  }
}

# Skips (under R CMD check outside a checkout) or fails (scripts/test sets SUIRO_ROOT) when the
# checkout is not there.
need_root <- function() {
  root <- suiro_root()
  if (is.null(root)) {
    if (nzchar(Sys.getenv("SUIRO_ROOT"))) stop("SUIRO_ROOT is set but is not a suiro checkout")
    testthat::skip("not inside a suiro checkout")
  }
  root
}

lua_exe <- function() {
  exe <- Sys.getenv("SUIRO_WORKER_EXE")
  if (!nzchar(exe)) {
    root <- need_root()
    exe <- file.path(root, "build", "bin", "suiro")
  }
  if (!file.exists(exe)) {
    if (nzchar(Sys.getenv("SUIRO_ROOT"))) stop("no Lua worker executable at ", exe, " (run scripts/build)")
    testthat::skip("no Lua worker executable (build the checkout)")
  }
  exe
}

# The environment entry that puts this R's own bin directory first on PATH, for a Lua or Python
# host that starts R workers as `Rscript` from PATH. R CMD check --as-cran puts stub `R` and
# `Rscript` scripts first on PATH (_R_CHECK_R_ON_PATH_), which only print that R should not be
# called directly: a host started under check would find the stub and its R workers would never
# start. Outside check this changes nothing but makes the R that runs the tests run the workers.
rscript_path_env <- function() {
  paste0("PATH=", shQuote(paste(R.home("bin"), Sys.getenv("PATH"), sep = .Platform$path.sep)))
}

# A pool stopped when the calling test ends.
local_pool <- function(..., env = parent.frame()) {
  p <- suiro_pool(..., env = worker_env())
  withr_defer(suiro_pool_stop(p), env)
  p
}

# Sanitizer runs preload a runtime: workers need it too (the engine passes only a whitelist).
worker_env <- function() {
  pre <- Sys.getenv("LD_PRELOAD")
  if (nzchar(pre)) list(LD_PRELOAD = pre) else NULL
}

withr_defer <- function(expr, env) {
  thunk <- as.call(list(function() expr))
  do.call(on.exit, list(thunk, TRUE, FALSE), envir = env)
}

# ---- golden vectors: the .txt notation as R values ---------------------------------------------

# A decimal int64 as a double carrying its bits (bit64's integer64 layout).
i64_bits <- function(s) {
  if (s == "na") s <- "-9223372036854775808"
  neg <- startsWith(s, "-")
  d <- sub("^-", "", s)
  limbs <- c(0, 0, 0, 0)
  for (ch in strsplit(d, "")[[1]]) {
    carry <- as.numeric(ch)
    for (k in 1:4) {
      v <- limbs[k] * 10 + carry
      limbs[k] <- v %% 65536
      carry <- v %/% 65536
    }
  }
  if (neg) {
    limbs <- 65535 - limbs
    carry <- 1
    for (k in 1:4) {
      v <- limbs[k] + carry
      limbs[k] <- v %% 65536
      carry <- v %/% 65536
    }
  }
  readBin(as.raw(c(rbind(limbs %% 256, limbs %/% 256))), "double", size = 8, endian = "little")
}

as_i64 <- function(tokens) structure(vapply(tokens, i64_bits, 0, USE.NAMES = FALSE), class = "integer64")

bits_double <- function(hex16) readBin(rev(as.raw(strtoi(substring(hex16, seq(1, 15, 2), seq(2, 16, 2)), 16L))), "double")

f64_tok <- function(t) {
  switch(t, inf = Inf, "-inf" = -Inf, nan = bits_double("7ff8000000000000"), na = NA_real_,
         if (startsWith(t, "nan:")) bits_double(substring(t, 5)) else as.numeric(t))
}

f32_tok <- function(t) {
  switch(t, inf = Inf, "-inf" = -Inf, nan = NaN, if (startsWith(t, "nan:")) NaN else as.numeric(t))
}

hex_raw <- function(h) {
  h <- substring(h, 2)
  if (!nzchar(h)) return(raw(0))
  as.raw(strtoi(substring(h, seq(1, nchar(h), 2), seq(2, nchar(h), 2)), 16L))
}

hex_str <- function(h) {
  r <- hex_raw(h)
  if (any(r == as.raw(0))) return(structure(list(r), class = "nul_string"))
  s <- rawToChar(r)
  Encoding(s) <- "UTF-8"
  s
}

# Parses a .txt file into list(value = what R decodes, typed = an R value that encodes to the
# same bytes, or NULL when R cannot express it).
read_vector <- function(path) {
  lines <- readLines(path, encoding = "UTF-8")
  lines <- lines[!startsWith(lines, "#")]
  pos <- 0L
  nxt <- function() {
    pos <<- pos + 1L
    strsplit(lines[[pos]], " ", fixed = TRUE)[[1]]
  }
  elements <- function(type, n) {
    toks <- if (n) vapply(seq_len(n), function(i) lines[[pos + i]], "") else character(0)
    pos <<- pos + n
    switch(type,
           f64 = vapply(toks, f64_tok, 0, USE.NAMES = FALSE),
           f32 = vapply(toks, f32_tok, 0, USE.NAMES = FALSE),
           i64 = as_i64(toks),
           i32 = vapply(toks, function(t) if (t == "na") NA_integer_ else as.integer(t), 0L, USE.NAMES = FALSE),
           u8 = as.raw(as.integer(toks)),
           bool = vapply(toks, function(t) switch(t, true = TRUE, false = FALSE, na = NA), NA, USE.NAMES = FALSE),
           c128 = vapply(toks, function(t) {
             p <- strsplit(t, " ", fixed = TRUE)[[1]]
             complex(real = f64_tok(p[1]), imaginary = f64_tok(p[2]))
           }, 0i, USE.NAMES = FALSE))
  }
  # the R value of a typed block, and its typed form
  value_of <- function(type, x) switch(type, f32 = x, u8 = x, i64 = x, x)
  typed_array <- function(type, x) {
    if (type %in% c("f32", "u8") || length(x) == 1L) suiro_typed(x, type) else x
  }
  strs_value <- function(n) {
    toks <- if (n) vapply(seq_len(n), function(i) lines[[pos + i]], "") else character(0)
    pos <<- pos + n
    vapply(toks, function(t) if (t == "na") NA_character_ else hex_str(t), "", USE.NAMES = FALSE)
  }
  parse <- function() {
    t <- nxt()
    kw <- t[1]
    switch(kw,
      nil = list(value = NULL, typed = NULL, ok = TRUE),
      bool = { v <- switch(t[2], true = TRUE, false = FALSE, na = NA); list(value = v, typed = v, ok = TRUE) },
      i64 = {
        if (t[2] != "na" && abs(as.numeric(t[2])) < 2^31 && t[2] != "-2147483648") {
          list(value = as.integer(t[2]), typed = as.integer(t[2]), ok = TRUE)
        } else {
          b <- as_i64(t[2])
          big <- t[2] == "na" || abs(as.numeric(t[2])) > 2^53
          list(value = if (big) b else as.numeric(t[2]), typed = suiro_typed(b, "i64", form = "scalar"), ok = TRUE)
        }
      },
      f64 = { v <- f64_tok(t[2]); list(value = v, typed = v, ok = TRUE) },
      str = { v <- hex_str(t[2]); list(value = v, typed = v, ok = !inherits(v, "nul_string")) },
      bytes = { v <- hex_raw(t[2]); list(value = v, typed = v, ok = TRUE) },
      array = {
        n <- as.integer(t[3])
        x <- elements(t[2], n)
        list(value = x, typed = typed_array(t[2], x), ok = TRUE)
      },
      ndarray = {
        nd <- as.integer(t[4])
        dims <- as.integer(t[seq_len(nd) + 4L])
        x <- elements(t[2], prod(dims))
        v <- if (nd == 0L) x else if (t[3] == "F" || nd == 1L) array(x, dims) else aperm(array(x, rev(dims)))
        if (nd > 0L && inherits(x, "integer64")) v <- structure(unclass(v), dim = dim(v), class = "integer64")
        typed <- if (t[3] == "F" && nd > 0L && !t[2] %in% c("f32", "u8", "i64")) v else
          suiro_typed(x, t[2], form = "ndarray", order = t[3], shape = dims)
        list(value = v, typed = typed, ok = TRUE)
      },
      strs = {
        v <- strs_value(as.integer(t[2]))
        list(value = v, typed = if (length(v) == 1L) suiro_typed(v, form = "strs") else v, ok = TRUE)
      },
      list = {
        n <- as.integer(t[2])
        kids <- lapply(seq_len(n), function(i) parse())
        list(value = lapply(kids, `[[`, "value"), typed = lapply(kids, `[[`, "typed"),
             ok = all(vapply(kids, `[[`, NA, "ok")))
      },
      dict = {
        n <- as.integer(t[2])
        keys <- character(n)
        kids <- vector("list", n)
        for (i in seq_len(n)) {
          keys[i] <- hex_str(nxt()[2])
          kids[[i]] <- parse()
        }
        v <- structure(lapply(kids, `[[`, "value"), names = keys)
        ty <- structure(lapply(kids, `[[`, "typed"), names = keys)
        list(value = v, typed = ty, ok = all(vapply(kids, `[[`, NA, "ok")))
      },
      frame = {
        nc <- as.integer(t[2])
        nr <- as.integer(t[3])
        keys <- character(nc)
        kids <- vector("list", nc)
        for (i in seq_len(nc)) {
          keys[i] <- hex_str(nxt()[2])
          kids[[i]] <- parse()
        }
        mk <- function(cols) structure(cols, names = keys, class = "data.frame", row.names = c(NA_integer_, -nr))
        list(value = mk(lapply(kids, `[[`, "value")),
             typed = mk(lapply(kids, function(k) if (inherits(k$typed, "suiro_typed") && identical(attr(k$typed, "suiro_form"), "array") && length(k$typed) == 1L && !attr(k$typed, "suiro_type") %in% c("f32", "u8")) k$value else k$typed)),
             ok = all(vapply(kids, `[[`, NA, "ok")))
      },
      factor = {
        n <- as.integer(t[3])
        codes <- vapply(seq_len(n), function(i) lines[[pos + i]], "")
        pos <<- pos + n
        lt <- nxt()
        lev <- strs_value(as.integer(lt[2]))
        v <- structure(vapply(codes, function(c) if (c == "na") NA_integer_ else as.integer(c) + 1L, 0L, USE.NAMES = FALSE),
                       levels = lev,
                       class = if (t[2] == "ordered") c("ordered", "factor") else "factor")
        list(value = v, typed = v, ok = TRUE)
      },
      date = {
        n <- as.integer(t[3])
        raw_toks <- vapply(seq_len(n), function(i) lines[[pos + i]], "")
        x <- elements(t[2], n)
        v <- if (t[2] == "i64") {
          structure(vapply(raw_toks, function(s) if (s == "na") NA_real_ else as.numeric(s), 0, USE.NAMES = FALSE), class = "Date")
        } else {
          structure(x, class = "Date")
        }
        list(value = v, typed = if (t[2] == "i64") suiro_typed(x, "i64", form = "date") else v, ok = TRUE)
      },
      timestamp = {
        n <- as.integer(t[4])
        tz <- hex_str(nxt()[2])
        raw_toks <- vapply(seq_len(n), function(i) lines[[pos + i]], "")
        x <- elements(t[2], n)
        scale <- c(s = 1, ms = 1e-3, us = 1e-6, ns = 1e-9)[[t[3]]]
        # i64: double seconds that remember the unit; ns ones must be whole microseconds
        i64_secs <- function(s) {
          if (s == "na") return(NA_real_)
          if (t[3] != "ns") return(as.numeric(s) / c(s = 1, ms = 1e3, us = 1e6)[[t[3]]])
          if (s == "0") return(0)
          if (!endsWith(s, "000")) { sub_us <<- TRUE; return(NA_real_) }
          as.numeric(sub("000$", "", s)) / 1e6
        }
        secs <- if (t[2] == "f64") (if (scale == 1) x else x * scale) else vapply(raw_toks, i64_secs, 0, USE.NAMES = FALSE)
        v <- structure(secs, class = c("POSIXct", "POSIXt"))
        if (nzchar(tz)) attr(v, "tzone") <- tz
        if (t[2] == "i64") attr(v, "suiro_unit") <- t[3]
        typed <- if (t[2] == "f64" && t[3] == "s") v else suiro_typed(x, t[2], form = "timestamp", unit = t[3], tz = tz)
        list(value = v, typed = typed, ok = TRUE)
      },
      error = {
        idx <- as.numeric(t[2])
        cls <- hex_str(nxt()[2]); msg <- hex_str(nxt()[2]); tb <- hex_str(nxt()[2])
        v <- structure(list(message = msg, call = NULL, remote_class = cls, traceback = tb,
                            index = if (idx < 0) NA_integer_ else idx + 1),
                       class = c("suiro_error_remote", "suiro_error", "error", "condition"))
        list(value = v, typed = v, ok = TRUE)
      },
      call = {
        text <- hex_str(nxt()[2])
        a <- parse()
        d <- parse()
        v <- structure(list(target = if (t[2] == "name") text, source = if (t[2] == "source") text,
                            args = a$value, named = d$value), class = "suiro_call")
        ty <- structure(list(target = if (t[2] == "name") text, source = if (t[2] == "source") text,
                             args = a$typed, named = d$typed), class = "suiro_call")
        list(value = v, typed = ty, ok = a$ok && d$ok)
      },
      ref = {
        nd <- as.integer(t[7])
        name <- hex_str(nxt()[2])
        v <- structure(list(name = name, type = t[2], order = t[3], flags = t[4], offset = as.numeric(t[5]),
                            length = as.numeric(t[6]), shape = as.numeric(t[seq_len(nd) + 7L])),
                       class = "suiro_wire_ref")
        list(value = v, typed = v, ok = TRUE, describe = TRUE)
      },
      func = {
        n <- as.integer(t[4])
        kids <- lapply(seq_len(n), function(i) parse())
        ok <- all(vapply(kids, `[[`, NA, "ok"))
        if (t[2] == "r") { # R-only forms (wire-format.md, "R conventions"): R applies them
          cap <- lapply(kids[-1], `[[`, "value")
          v <- switch(kids[[1]]$value,
                      "base::structure" = do.call(structure, c(list(cap[[1]]), cap[[2]])),
                      "suiro::relay" = structure(cap, class = "suiro_relayed"),
                      stop("no R mapping for R function ", kids[[1]]$value))
          return(list(value = v, typed = v, ok = ok, r_only = TRUE))
        }
        v <- structure(list(lang = t[2], key = t[3], name = kids[[1]]$value,
                            captured = lapply(kids[-1], `[[`, "value")), class = "suiro_wire_func")
        list(value = v, typed = v, ok = ok, describe = TRUE)
      },
      backref = list(value = NULL, typed = NULL, ok = FALSE, backref = TRUE),
      range = {
        start <- as.numeric(t[2]); step <- as.numeric(t[3]); n <- as.numeric(t[4])
        v <- if (n == 0) integer(0) else as.integer(start + step * (seq_len(n) - 1))
        list(value = v, typed = suiro_typed(c(start, step, n), "i64", form = "range"), ok = TRUE)
      },
      stop("unknown keyword ", kw))
  }
  sub_us <- FALSE # an ns timestamp with a sub-microsecond part: R refuses it
  out <- parse()
  out$sub_us <- sub_us
  out$r_only <- any(grepl("^func r ", lines))
  out$describe <- any(grepl("^(ref|func) ", lines)) && !out$r_only
  out$backref <- any(grepl("^backref ", lines))
  out$nul <- any(vapply(lines, function(l) grepl("^str ", l) && inherits(hex_str(strsplit(l, " ")[[1]][2]), "nul_string"), NA))
  out
}

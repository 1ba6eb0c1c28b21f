# The value format (docs/wire-format.md) from R: a debugging and interop aid.
#
# suiro_wire_encode(x, rich = FALSE)   the bytes of x (rich: R-only forms allowed)
# suiro_wire_decode(bytes, describe, trusted)
#                                      the value (describe: references and foreign functions
#                                      become descriptors that encode back to the same bytes;
#                                      R-only forms, serialize() bytes among them, are refused
#                                      unless trusted = TRUE: only an R process wrote them)
# suiro_typed(x, ...)                  wire forms R has no type for (f32, u8 arrays, C-order
#                                      arrays, i64 timestamps, ranges): for tests and interop

suiro_wire_encode <- function(x, rich = FALSE) .Call(C_wire_encode, x, isTRUE(rich))

suiro_wire_decode <- function(bytes, describe = FALSE, trusted = FALSE)
  .Call(C_wire_decode, bytes, isTRUE(describe), isTRUE(trusted))

suiro_typed <- function(x, type = "f64", form = "array", order = NULL, shape = NULL, unit = NULL, tz = NULL) {
  bits <- inherits(x, "integer64")
  x <- unclass(x)
  attributes(x) <- NULL
  structure(x, class = "suiro_typed", suiro_type = type, suiro_form = form, suiro_order = order,
            suiro_shape = if (!is.null(shape)) as.numeric(shape), suiro_unit = unit, tzone = tz,
            suiro_bits = if (bits) TRUE)
}

suiro_is_view <- function(x) .Call(C_is_view, x)

suiro_view_stats <- function() .Call(C_view_stats)

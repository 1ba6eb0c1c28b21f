/*
 * suiro_wire_compat.h — the wire API's unprefixed names (wire_writer, wire_put_i64, ...) as
 * macros for the prefixed ones of suiro_wire.h, for code written against them: kept for one
 * release (the language faces still spell them so). The linked symbols are suiro_wire_* either
 * way; the WIRE_* constants are not renamed. New code uses the suiro_wire_ names.
 */
#ifndef SUIRO_WIRE_COMPAT_H
#define SUIRO_WIRE_COMPAT_H

#include "suiro_wire.h"

#define wire_copy suiro_wire_copy
#define wire_is_na_f64_bits suiro_wire_is_na_f64_bits
#define wire_item suiro_wire_item
#define wire_level suiro_wire_level
#define wire_next suiro_wire_next
#define wire_put_array suiro_wire_put_array
#define wire_put_backref suiro_wire_put_backref
#define wire_put_bool suiro_wire_put_bool
#define wire_put_bytes suiro_wire_put_bytes
#define wire_put_call suiro_wire_put_call
#define wire_put_date suiro_wire_put_date
#define wire_put_dict suiro_wire_put_dict
#define wire_put_error suiro_wire_put_error
#define wire_put_f64 suiro_wire_put_f64
#define wire_put_factor suiro_wire_put_factor
#define wire_put_frame suiro_wire_put_frame
#define wire_put_func suiro_wire_put_func
#define wire_put_i64 suiro_wire_put_i64
#define wire_put_item suiro_wire_put_item
#define wire_put_list suiro_wire_put_list
#define wire_put_ndarray suiro_wire_put_ndarray
#define wire_put_nil suiro_wire_put_nil
#define wire_put_range suiro_wire_put_range
#define wire_put_ref suiro_wire_put_ref
#define wire_put_str suiro_wire_put_str
#define wire_put_strs suiro_wire_put_strs
#define wire_put_timestamp suiro_wire_put_timestamp
#define wire_reader suiro_wire_reader
#define wire_reader_error suiro_wire_reader_error
#define wire_reader_init suiro_wire_reader_init
#define wire_ref suiro_wire_ref
#define wire_skip suiro_wire_skip
#define wire_str suiro_wire_str
#define wire_strs suiro_wire_strs
#define wire_strs_add suiro_wire_strs_add
#define wire_strs_add_na suiro_wire_strs_add_na
#define wire_strs_begin suiro_wire_strs_begin
#define wire_strs_iter suiro_wire_strs_iter
#define wire_strs_next suiro_wire_strs_next
#define wire_tag_name suiro_wire_tag_name
#define wire_type_name suiro_wire_type_name
#define wire_type_size suiro_wire_type_size
#define wire_validate suiro_wire_validate
#define wire_writer suiro_wire_writer
#define wire_writer_error suiro_wire_writer_error
#define wire_writer_finish suiro_wire_writer_finish
#define wire_writer_free suiro_wire_writer_free
#define wire_writer_init suiro_wire_writer_init
#define wire_writer_reset suiro_wire_writer_reset

#endif /* SUIRO_WIRE_COMPAT_H */

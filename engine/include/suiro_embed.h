/*
 * suiro_embed.h — the former names of suiro_conf.h (suiro_embed_open, ...) as macros for the
 * new ones, kept for one release: the Python and R faces still spell them so.
 */
#ifndef SUIRO_EMBED_H
#define SUIRO_EMBED_H

#include "suiro_conf.h"

#define suiro_embed suiro_conf
#define suiro_embed_open suiro_conf_open
#define suiro_embed_close suiro_conf_close
#define suiro_embed_config suiro_conf_config
#define suiro_embed_pool_options suiro_conf_pool_options
#define suiro_embed_template suiro_conf_template
#define suiro_embed_duration suiro_conf_duration
#define suiro_embed_size suiro_conf_size
#define suiro_embed_fnref suiro_conf_fnref

#endif

/* test_embed.c — the config readers as the faces use them (engine/conf/conf.c, suiro_conf.h): config
 * scripts to wire, templates, durations and sizes, with the Lua face's messages. */
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "suiro_conf.h"

static suiro_conf *open_embed(void) {
  char dir[4200], err[512];
  snprintf(dir, sizeof dir, "%s/../../engine/conf", harness_vectors_dir()); /* the readers' home */
  suiro_conf *e = suiro_conf_open(dir, err, sizeof err);
  if (!e) fprintf(stderr, "embed: %s\n", err);
  CHECK(e != NULL);
  return e;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  fputs(text, f);
  fclose(f);
}

TEST(config_scripts_become_wire_dicts) {
  suiro_conf *e = open_embed();
  char path[] = "/tmp/suiro_conf_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  write_file(path, "return { fast = { workers = 2, timeout = '1m30s', slot_size = '512B', env = { A = 1 } },\n"
                   "         py = { launcher = suiro.python { python = '/usr/bin/python3' } } }\n");
  void *buf;
  size_t len;
  char err[512];
  CHECK_EQ(suiro_conf_config(e, path, &buf, &len, err, sizeof err), 0);
  suiro_wire_reader r;
  suiro_wire_item it;
  CHECK(suiro_wire_reader_init(&r, buf, len) == WIRE_OK && suiro_wire_next(&r, &it) == WIRE_OK);
  CHECK(it.tag == WIRE_DICT && it.n == 2);
  CHECK(suiro_wire_next(&r, &it) == WIRE_OK && it.tag == WIRE_STR && it.n == 4 && !memcmp(it.data, "fast", 4));
  CHECK(suiro_wire_next(&r, &it) == WIRE_OK && it.tag == WIRE_DICT);
  int seen = 0;
  uint64_t n = it.n;
  for (uint64_t i = 0; i < n; i++) {
    suiro_wire_item k, v;
    CHECK(suiro_wire_next(&r, &k) == WIRE_OK && k.tag == WIRE_STR);
    if (k.n == 7 && !memcmp(k.data, "timeout", 7)) {
      CHECK(suiro_wire_next(&r, &v) == WIRE_OK && v.tag == WIRE_F64 && v.f == 90.0);
      seen++;
    } else if (k.n == 9 && !memcmp(k.data, "slot_size", 9)) {
      CHECK(suiro_wire_next(&r, &v) == WIRE_OK && v.tag == WIRE_I64 && v.i == 512);
      seen++;
    } else if (k.n == 7 && !memcmp(k.data, "workers", 7)) {
      CHECK(suiro_wire_next(&r, &v) == WIRE_OK && v.tag == WIRE_I64 && v.i == 2);
      seen++;
    } else {
      CHECK(suiro_wire_skip(&r) == WIRE_OK);
    }
  }
  CHECK_EQ(seen, 3);
  free(buf);
  /* errors name the file, the pool and the key */
  write_file(path, "return { ingest = { timeout = '1m30' } }\n");
  CHECK_EQ(suiro_conf_config(e, path, &buf, &len, err, sizeof err), -1);
  CHECK(strstr(err, path) && strstr(err, "pool \"ingest\": timeout: bad duration \"1m30\""));
  write_file(path, "return { p = { wrokers = 2 } }\n");
  CHECK_EQ(suiro_conf_config(e, path, &buf, &len, err, sizeof err), -1);
  CHECK(strstr(err, "unknown key \"wrokers\" in pool \"p\"") && strstr(err, "did you mean workers?"));
  unlink(path);
  CHECK_EQ(suiro_conf_config(e, path, &buf, &len, err, sizeof err), -1);
  suiro_conf_close(e);
}

TEST(templates_durations_sizes) {
  suiro_conf *e = open_embed();
  suiro_template t;
  char err[512];
  CHECK_EQ(suiro_conf_template(e, "{mean: f64, n: i64}", &t, err, sizeof err), 0);
  CHECK(t.kind == SUIRO_OUT_RECORD && t.nfields == 2 && !strcmp(t.fields[1].name, "n") && t.fields[1].type == WIRE_T_I64);
  CHECK_EQ(suiro_conf_template(e, "f64[3]", &t, err, sizeof err), 0);
  CHECK(t.kind == SUIRO_OUT_ARRAY && t.ndim == 1 && t.shape[0] == 3);
  CHECK_EQ(suiro_conf_template(e, "f64[", &t, err, sizeof err), -1);
  CHECK(strstr(err, "bad template \"f64[\"") != NULL);
  CHECK_EQ(suiro_conf_template(e, "{name: str}", &t, err, sizeof err), -1);
  double s;
  CHECK_EQ(suiro_conf_duration(e, "250ms", &s, err, sizeof err), 0);
  CHECK(s == 0.25);
  CHECK_EQ(suiro_conf_duration(e, "25 0ms", &s, err, sizeof err), -1);
  CHECK(strstr(err, "at column 4") != NULL);
  int64_t b;
  CHECK_EQ(suiro_conf_size(e, "4KiB", &b, err, sizeof err), 0);
  CHECK_EQ(b, 4096);
  CHECK_EQ(suiro_conf_fnref(e, "stats::quantile", err, sizeof err), 0);
  CHECK_EQ(suiro_conf_fnref(e, "a..b", err, sizeof err), -1);
  suiro_conf_close(e);
}

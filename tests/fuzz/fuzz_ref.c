/*
 * fuzz_ref.c — libFuzzer harness for wire buffers that carry REF items (region references), fed
 * through every decoder that maps regions (built and run by scripts/fuzz; issue 8, item 4):
 *
 *   1. the engine: each REF item the reader yields goes to suiro_zc_open; an accepted view must lie
 *      inside the region as mapped here (every byte is read, so a view past the mapping faults),
 *      and its reference is given back;
 *   2. the Lua face: the same bytes through suiro.wire.decode (lua/lvalues.c, ldec.c: a REF
 *      becomes a read-only suiro.array view) and through lcodec_decode_values (how a host reads
 *      results), every array the decode returns summed, then a full GC that releases the views.
 *
 * Real regions: at start the harness makes regions in this process (so they are of its own pool
 * family, the only names a decoder may accept) and files that only look like regions. Inputs name
 * them through placeholders: a str part holding exactly "/SUIRO<k>" (7 bytes, one padded word) is
 * replaced, before decoding, by the str part of the k-th name below. The str part is the last part
 * of a REF, and nothing in the format holds byte offsets, so the splice keeps a valid buffer valid.
 *   /SUIRO1  a 64 KiB region holding a pattern of f64 values
 *   /SUIRO2  a 1 MiB region held by a long-lived view (what a forged reference must not disturb)
 *   /SUIRO3  a family-named file holding garbage (no region magic)
 *   /SUIRO4  a family-named file of 16 bytes (shorter than a region header)
 *   /SUIRO5  a family-named file with a region header that claims 1 GiB but holds 128 bytes
 * Any other name is passed as is (seeds also carry names of other families and of files that are
 * not suiro's). tests/fuzz/corpus_ref/ holds the seeds (regenerate: FUZZ_REF_SEEDS=DIR fuzz_ref).
 *
 * Invariants checked after every input (abort on failure, so libFuzzer saves the input):
 *   - every region's shared reference count is back where it was (a decode can only release what
 *     it took), and its grants too;
 *   - the held view of /SUIRO2 still reads its pattern, and the pattern of /SUIRO1 is unchanged;
 *   - a view the engine accepted lies inside the mapping and holds whole elements.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "suiro.h"
#include "suiro_bind.h"
#include "suiro_wire.h"
#include "lsuiro.h"

#define REQUIRE(c)                                                                 \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "fuzz_ref: invariant failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

/* The shared header at the start of a region (engine/src/region.c; test code may know it). */
typedef struct region_hdr {
  uint64_t magic;
  _Atomic int64_t refs;
  uint64_t capacity;
  int32_t creator;
  int32_t pad;
  _Atomic int64_t grants;
} region_hdr;
#define REGION_MAGIC 0x6e6f69676572756full
#define REGION_HDR 64

#define NPLACE 5
static char names[NPLACE + 1][256]; /* 1-based */
static suiro_buf *bufs[3];          /* /SUIRO1, /SUIRO2 */
static region_hdr *hdrs[3];
static int64_t base_refs[3], base_grants[3];
static suiro_view held;             /* a view of /SUIRO2, as a Lua host would hold one */
static lua_State *L;
static int decode_ref = LUA_NOREF, walk_ref = LUA_NOREF, values_ref = LUA_NOREF;
static volatile double sink;
static int verbose; /* FUZZ_REF_VERBOSE=1: say what each REF opened to */

static double pattern(size_t i) { return (double)i * 0.5 + 1.0; }

static void fill_pattern(suiro_buf *b, size_t bytes) {
  double *d = suiro_buf_data(b);
  for (size_t i = 0; i < bytes / 8; i++) d[i] = pattern(i);
}

static int pattern_intact(const void *data, size_t bytes) {
  const double *d = data;
  for (size_t i = 0; i < bytes / 8; i++)
    if (d[i] != pattern(i)) return 0;
  return 1;
}

/* A file in /dev/shm with a name of this process's family (the prefix of its own regions). */
static void family_file(int k, const char *tag, const void *bytes, size_t len) {
  const char *own = suiro_buf_name(bufs[1]);
  const char *cut = strrchr(own, '_');
  snprintf(names[k], sizeof names[k], "%.*s_%s", (int)(cut - own), own, tag);
  int fd = shm_open(names[k], O_RDWR | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes, len) == (ssize_t)len);
  close(fd);
}

static void cleanup(void) {
  for (int k = 3; k <= NPLACE; k++)
    if (names[k][0]) shm_unlink(names[k]);
  for (int k = 1; k <= 2; k++)
    if (bufs[k] && suiro_buf_name(bufs[k])) shm_unlink(suiro_buf_name(bufs[k]));
}

static const char *lua_helpers =
  "local decode = ...\n"
  "local function walk(v, seen, depth)\n"
  "  if depth > 80 then return 0 end\n"
  "  local t = type(v)\n"
  "  if t == 'table' then\n"
  "    if seen[v] then return 0 end\n"
  "    seen[v] = true\n"
  "    local n = 0\n"
  "    for k, x in pairs(v) do n = n + walk(k, seen, depth + 1) + walk(x, seen, depth + 1) end\n"
  "    return n\n"
  "  elseif t == 'userdata' then\n"
  "    local mt = getmetatable(v)\n"
  "    if type(mt) == 'table' and mt.__name == 'suiro.array' then\n"
  "      local ok = pcall(function() if #v <= 65536 then return v:sum() end return v[1] end)\n"
  "      local okl, n = pcall(function() return #v end)\n"
  "      if okl and n > 0 then local _ = v[1]; _ = v[n] end\n"
  "      return ok and 1 or 0\n"
  "    end\n"
  "  end\n"
  "  return 0\n"
  "end\n"
  "return walk\n";

/* lcodec_decode_values on a string (copied to an 8-aligned userdata first). */
static int l_decode_values(lua_State *LS) {
  size_t n;
  const char *s = luaL_checklstring(LS, 1, &n);
  void *buf = lua_newuserdatauv(LS, n ? n : 1, 0);
  memcpy(buf, s, n);
  lua_settop(LS, 2);
  int got = lcodec_decode_values(LS, buf, n);
  lua_createtable(LS, got, 0);
  lua_insert(LS, -got - 1);
  for (int i = got; i >= 1; i--) lua_rawseti(LS, -i - 1, i);
  return 1;
}

/* ---- seeds ------------------------------------------------------------------------------------ */

static void seed_file(const char *dir, const char *name, suiro_wire_writer *w) {
  const void *out;
  size_t len;
  REQUIRE(suiro_wire_writer_finish(w, &out, &len) == WIRE_OK);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", dir, name);
  FILE *f = fopen(path, "wb");
  REQUIRE(f);
  fwrite(out, 1, len, f);
  fclose(f);
  suiro_wire_writer_free(w);
}

static void put_ref(suiro_wire_writer *w, const char *name, int type, int order, uint64_t offset, uint64_t length, int ndim,
                    const uint64_t *dims) {
  suiro_wire_ref r;
  memset(&r, 0, sizeof r);
  r.name = (suiro_wire_str){ name, strlen(name) };
  r.type = type;
  r.order = order;
  r.offset = offset;
  r.length = length;
  r.ndim = ndim;
  r.dims = dims;
  REQUIRE(suiro_wire_put_ref(w, &r) == WIRE_OK);
}

static void write_seeds(const char *dir) {
  static const struct {
    const char *file, *name;
    int type, order;
    uint64_t offset, length;
    int ndim;
    uint64_t dims[3];
  } refs[] = {
    { "r1_f64_all", "/SUIRO1", WIRE_T_F64, 0, 64, 65536, 0, { 0 } },
    { "r1_f64_head", "/SUIRO1", WIRE_T_F64, 0, 64, 8, 0, { 0 } },
    { "r1_f64_2d", "/SUIRO1", WIRE_T_F64, 1, 64, 8 * 64 * 16, 2, { 64, 16 } },
    { "r1_i32_3d", "/SUIRO1", WIRE_T_I32, 0, 128, 4 * 2 * 3 * 4, 3, { 2, 3, 4 } },
    { "r1_u8", "/SUIRO1", WIRE_T_U8, 0, 72, 1000, 0, { 0 } },
    { "r1_bool", "/SUIRO1", WIRE_T_BOOL, 0, 64, 16, 0, { 0 } },
    { "r1_c128", "/SUIRO1", WIRE_T_C128, 0, 64, 32, 0, { 0 } },
    { "r1_bytes", "/SUIRO1", WIRE_REF_BYTES, 0, 64, 100, 0, { 0 } },
    { "r1_wire", "/SUIRO1", WIRE_REF_WIRE, 0, 64, 16, 0, { 0 } },
    { "r1_past_end", "/SUIRO1", WIRE_T_F64, 0, 64, 65536 + 8, 0, { 0 } },
    { "r1_huge_len", "/SUIRO1", WIRE_T_F64, 0, 64, 800000000000ull, 0, { 0 } },
    { "r1_header", "/SUIRO1", WIRE_T_F64, 0, 0, 64, 0, { 0 } },
    { "r1_far_offset", "/SUIRO1", WIRE_T_F64, 0, 1ull << 40, 8, 0, { 0 } },
    { "r1_huge_shape", "/SUIRO1", WIRE_T_F64, 0, 64, 800000000000ull, 2, { 100000, 1000000 } },
    { "r2_all", "/SUIRO2", WIRE_T_F64, 0, 64, 1 << 20, 0, { 0 } },
    { "r2_tail", "/SUIRO2", WIRE_T_F64, 0, 64 + (1 << 20) - 8, 8, 0, { 0 } },
    { "r3_junk", "/SUIRO3", WIRE_T_F64, 0, 64, 8, 0, { 0 } },
    { "r4_tiny", "/SUIRO4", WIRE_T_U8, 0, 64, 1, 0, { 0 } },
    { "r5_liar", "/SUIRO5", WIRE_T_F64, 0, 64, 1 << 20, 0, { 0 } },
    { "r5_small", "/SUIRO5", WIRE_T_F64, 0, 64, 64, 0, { 0 } },
    { "other_family", "/suiro_1_2_a3", WIRE_T_F64, 0, 64, 8, 0, { 0 } },
    { "not_suiro", "/hostile_not_suiro", WIRE_T_F64, 0, 64, 8, 0, { 0 } },
    { "dotdot", "/../../etc/passwd", WIRE_T_U8, 0, 64, 8, 0, { 0 } },
    { "no_slash", "SUIRO1x", WIRE_T_F64, 0, 64, 8, 0, { 0 } },
  };
  for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
    suiro_wire_writer w;
    suiro_wire_writer_init(&w, NULL, 0);
    put_ref(&w, refs[i].name, refs[i].type, refs[i].order, refs[i].offset, refs[i].length, refs[i].ndim, refs[i].dims);
    seed_file(dir, refs[i].file, &w);
  }
  /* references inside containers, and the same region named many times */
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  suiro_wire_put_list(&w, 3);
  suiro_wire_put_i64(&w, 7);
  put_ref(&w, "/SUIRO1", WIRE_T_F64, 0, 64, 80, 0, NULL);
  put_ref(&w, "/SUIRO2", WIRE_T_F64, 0, 64, 80, 0, NULL);
  seed_file(dir, "list_two_regions", &w);
  suiro_wire_writer_init(&w, NULL, 0);
  suiro_wire_put_dict(&w, 2);
  suiro_wire_put_str(&w, "a", 1);
  put_ref(&w, "/SUIRO2", WIRE_T_I64, 0, 64, 8 * 10, 0, NULL);
  suiro_wire_put_str(&w, "b", 1);
  put_ref(&w, "/SUIRO2", WIRE_T_I64, 0, 64, 8 * 10, 0, NULL);
  seed_file(dir, "dict_same_region_twice", &w);
  suiro_wire_writer_init(&w, NULL, 0);
  suiro_wire_put_list(&w, 40);
  for (int i = 0; i < 40; i++) put_ref(&w, "/SUIRO2", WIRE_T_F64, 0, 64 + 8 * (uint64_t)i, 8, 0, NULL);
  seed_file(dir, "list_40_refs_region2", &w);
  /* a frame whose column is a reference (refused by writers until frame columns travel
   * zero-copy; then a seed) */
  suiro_wire_writer_init(&w, NULL, 0);
  suiro_wire_put_frame(&w, 1, 4096);
  suiro_wire_put_str(&w, "x", 1);
  suiro_wire_ref fr;
  memset(&fr, 0, sizeof fr);
  fr.name = (suiro_wire_str){ "/SUIRO1", 7 };
  fr.type = WIRE_T_F64;
  fr.offset = 64;
  fr.length = 8 * 4096;
  if (suiro_wire_put_ref(&w, &fr) == WIRE_OK) seed_file(dir, "frame_ref_column", &w);
  else suiro_wire_writer_free(&w);
}

/* ---- setup -------------------------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  bufs[1] = suiro_buf_alloc(65536);
  bufs[2] = suiro_buf_alloc(1 << 20);
  REQUIRE(bufs[1] && bufs[2] && suiro_buf_name(bufs[1]) && suiro_buf_name(bufs[2]));
  fill_pattern(bufs[1], 65536);
  fill_pattern(bufs[2], 1 << 20);
  for (int k = 1; k <= 2; k++) {
    snprintf(names[k], sizeof names[k], "%s", suiro_buf_name(bufs[k]));
    hdrs[k] = (region_hdr *)((char *)suiro_buf_data(bufs[k]) - REGION_HDR);
    REQUIRE(hdrs[k]->magic == REGION_MAGIC);
  }
  /* the long-lived view of /SUIRO2: granted by a "sender", taken over by a "receiver" */
  suiro_wire_writer w;
  suiro_wire_writer_init(&w, NULL, 0);
  REQUIRE(suiro_zc_put(&w, bufs[2], suiro_buf_data(bufs[2]), 1 << 20, WIRE_T_F64, 0, 0, NULL) == WIRE_OK);
  const void *out;
  size_t len;
  REQUIRE(suiro_wire_writer_finish(&w, &out, &len) == WIRE_OK);
  suiro_wire_reader r;
  suiro_wire_item it;
  REQUIRE(suiro_wire_reader_init(&r, out, len) == WIRE_OK && suiro_wire_next(&r, &it) == WIRE_OK && it.tag == WIRE_REF);
  REQUIRE(suiro_zc_open(&it.ref, &held) == SUIRO_OK);
  suiro_wire_writer_free(&w);

  char junk[256];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
  family_file(3, "zjunk", junk, sizeof junk);
  family_file(4, "ztiny", junk, 16);
  unsigned char liar[128];
  memset(liar, 0, sizeof liar);
  region_hdr h;
  memset(&h, 0, sizeof h);
  h.magic = REGION_MAGIC;
  h.refs = 1;
  h.capacity = 1u << 30;
  memcpy(liar, &h, sizeof h);
  family_file(5, "zliar", liar, sizeof liar);
  atexit(cleanup);

  for (int k = 1; k <= 2; k++) {
    base_refs[k] = hdrs[k]->refs;
    base_grants[k] = hdrs[k]->grants;
  }

  verbose = getenv("FUZZ_REF_VERBOSE") != NULL;
  const char *seeds = getenv("FUZZ_REF_SEEDS");
  if (seeds) {
    write_seeds(seeds);
    exit(0);
  }

  L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "suiro.core", luaopen_suiro_core, 0);
  lua_getfield(L, -1, "wire_decode");
  decode_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
  REQUIRE(luaL_loadstring(L, lua_helpers) == LUA_OK);
  lua_rawgeti(L, LUA_REGISTRYINDEX, decode_ref);
  REQUIRE(lua_pcall(L, 1, 1, 0) == LUA_OK);
  walk_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pushcfunction(L, l_decode_values);
  values_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

/* ---- one input ---------------------------------------------------------------------------------- */

/* The input with placeholders replaced: a malloc'd, 8-aligned copy (exact size, so ASan sees any
 * read past the end). */
static unsigned char *substitute(const uint8_t *data, size_t size, size_t *out_len) {
  size_t cap = size * 8 + 64, n = 0;
  unsigned char *out = malloc(cap);
  size_t i = 0;
  while (i < size) {
    int k;
    if (i % 8 == 0 && i + 16 <= size && data[i] == 0x06 && data[i + 1] == 0 && data[i + 2] == 7 &&
        !memcmp(data + i + 3, "\0\0\0\0\0", 5) && !memcmp(data + i + 8, "/SUIRO", 6) &&
        (k = data[i + 14] - '0') >= 1 && k <= NPLACE && data[i + 15] == 0) {
      size_t len = strlen(names[k]);
      size_t need = 8 + ((len + 7) & ~(size_t)7);
      if (n + need > cap) break;
      uint64_t hw = 0x06 | ((uint64_t)len << 16);
      memcpy(out + n, &hw, 8);
      memset(out + n + 8, 0, need - 8);
      memcpy(out + n + 8, names[k], len);
      n += need;
      i += 16;
      continue;
    }
    if (n + 1 > cap) break;
    out[n++] = data[i++];
  }
  unsigned char *exact = malloc(n ? n : 1);
  memcpy(exact, out, n);
  free(out);
  *out_len = n;
  return exact;
}

static void engine_decode(const unsigned char *buf, size_t len) {
  suiro_wire_reader r;
  suiro_wire_item it;
  if (suiro_wire_reader_init(&r, buf, len) != WIRE_OK) return;
  while (suiro_wire_next(&r, &it) == WIRE_OK) {
    if (it.tag != WIRE_REF) continue;
    suiro_view v;
    suiro_status st = suiro_zc_open(&it.ref, &v);
    if (verbose) fprintf(stderr, "fuzz_ref: REF %.*s: %s\n", (int)it.ref.name.len, it.ref.name.ptr,
                         st == SUIRO_OK ? "opened" : suiro_last_error());
    if (st != SUIRO_OK) {
      REQUIRE(v.buf == NULL);
      continue;
    }
    /* inside the mapping: from the data start (after the header) to its end */
    const char *base = (const char *)suiro_buf_data(v.buf);
    REQUIRE((const char *)v.data >= base);
    size_t es = it.ref.type == WIRE_REF_BYTES || it.ref.type == WIRE_REF_WIRE ? 1 : suiro_wire_type_size(it.ref.type);
    REQUIRE(es && v.bytes % es == 0 && v.count == v.bytes / es);
    const unsigned char *p = v.data;
    unsigned x = 0;
    for (uint64_t i = 0; i < v.bytes; i += 4096) x += p[i];
    if (v.bytes) x += p[v.bytes - 1];
    sink += x;
    suiro_buf_unref(v.buf);
  }
}

static void lua_decode(const unsigned char *buf, size_t len) {
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, walk_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, decode_ref);
  lua_pushlstring(L, (const char *)buf, len);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    lua_newtable(L);
    lua_pushinteger(L, 0);
    if (lua_pcall(L, 3, 1, 0) != LUA_OK) { /* walking a value must not fail */
      fprintf(stderr, "fuzz_ref: walking a decoded value failed: %s\n", lua_tostring(L, -1));
      abort();
    }
  } else {
    const char *msg = lua_tostring(L, -1);
    if (verbose) fprintf(stderr, "fuzz_ref: lua: %s\n", msg ? msg : "(no message)");
    REQUIRE(msg && strstr(msg, "decode"));
  }
  lua_settop(L, top);
  lua_rawgeti(L, LUA_REGISTRYINDEX, walk_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, values_ref);
  lua_pushlstring(L, (const char *)buf, len);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    lua_newtable(L);
    lua_pushinteger(L, 0);
    REQUIRE(lua_pcall(L, 3, 1, 0) == LUA_OK);
  }
  lua_settop(L, top);
  lua_gc(L, LUA_GCCOLLECT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t len;
  unsigned char *buf = substitute(data, size, &len);
  engine_decode(buf, len);
  lua_decode(buf, len);
  free(buf);
  for (int k = 1; k <= 2; k++) {
    if (hdrs[k]->refs != base_refs[k] || hdrs[k]->grants != base_grants[k]) {
      fprintf(stderr, "fuzz_ref: region %d: refs %lld (was %lld), grants %lld (was %lld)\n", k,
              (long long)hdrs[k]->refs, (long long)base_refs[k], (long long)hdrs[k]->grants,
              (long long)base_grants[k]);
      abort();
    }
  }
  REQUIRE(pattern_intact(held.data, held.bytes));
  REQUIRE(pattern_intact(suiro_buf_data(bufs[1]), 65536));
  return 0;
}

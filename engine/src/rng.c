/*
 * rng.c — the per-element random streams of seeded maps (suiro_bind.h, section 5).
 *
 * xoshiro256** (Blackman and Vigna) seeded through splitmix64 from (seed, element index): the
 * draws of element i depend on nothing but the seed and i, so a seeded map gives bitwise the same
 * results on any number of workers and in every language. The golden draws are in
 * tests/vectors/rng.txt; tests/c/test_bind.c checks them. The current stream is thread-local:
 * a runner sets it around each element (plan.c) and a face's random() reads it.
 */
#include "internal.h"
#include "suiro_bind.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void suiro_rng_seed(suiro_rng *r, uint64_t seed, uint64_t index) {
  if (!r) return;
  uint64_t x = seed ^ (index * 0xd1342543de82ef95ull + 0x632be59bd9b4e019ull);
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t suiro_rng_next(suiro_rng *r) {
  if (!r) return 0;
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double suiro_rng_unit(suiro_rng *r) { return (double)(suiro_rng_next(r) >> 11) * 0x1.0p-53; }

int64_t suiro_rng_range(suiro_rng *r, int64_t lo, int64_t hi) {
  uint64_t x = suiro_rng_next(r);
  if (hi < lo) return lo; /* misuse: callers check lo <= hi */
  uint64_t span = (uint64_t)hi - (uint64_t)lo; /* no overflow in unsigned arithmetic */
  if (span == UINT64_MAX) return (int64_t)x;
  uint64_t lim = span + 1;
  uint64_t cut = UINT64_MAX - UINT64_MAX % lim; /* rejection: unbiased, platform independent */
  while (x >= cut) x = suiro_rng_next(r);
  return (int64_t)((uint64_t)lo + x % lim);
}

static _Thread_local suiro_rng current_rng;
static _Thread_local int current_set;

suiro_rng *suiro_rng_current(void) { return current_set ? &current_rng : NULL; }

/* plan.c: around each element of a seeded map */
void rng_enter(uint64_t seed, uint64_t index) {
  suiro_rng_seed(&current_rng, seed, index);
  current_set = 1;
}
void rng_leave(void) { current_set = 0; }

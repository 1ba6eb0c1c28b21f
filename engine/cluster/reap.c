/*
 * reap.c — Open MPI's shared-memory segments that a killed job left in /dev/shm.
 *
 * Open MPI 4.1's vader transport keeps one file per rank, /dev/shm/vader_segment.<node>.<..>.
 * <jobid in hex>.<local rank>, and removes it at MPI_Finalize; a job that was killed leaves them
 * (4 MiB each). Each rank's start removes the stale ones of this node, as the engine's reaper
 * removes suiro's own: a segment is stale when it belongs to this user, names this node, is not
 * of this job (its jobid), and no live process maps it (every /proc/PID/maps of this user is
 * read; a process whose maps cannot be read is not this user's). Runs once, on the thread that
 * started MPI, after MPI_Init: this job's own segments are mapped by then.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"

#define SHM_DIR "/dev/shm"
#define PREFIX "vader_segment."
#define MAX_CANDIDATES 256

/* 1 when some process maps one of names[0..n) (marks them in mapped[]). */
static void scan_maps(char names[][256], int n, int *mapped) {
  DIR *d = opendir("/proc");
  if (!d) {
    for (int i = 0; i < n; i++) mapped[i] = 1; /* cannot judge: keep them */
    return;
  }
  struct dirent *e;
  char path[64], line[512];
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || strlen(e->d_name) > 20) continue;
    snprintf(path, sizeof path, "/proc/%.20s/maps", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    while (fgets(line, sizeof line, f)) {
      char *p = strstr(line, SHM_DIR "/" PREFIX);
      if (!p) continue;
      p += sizeof SHM_DIR;
      size_t l = strcspn(p, " \n");
      for (int i = 0; i < n; i++)
        if (!mapped[i] && strlen(names[i]) == l && !memcmp(names[i], p, l)) mapped[i] = 1;
    }
    fclose(f);
  }
  closedir(d);
}

int cluster_reap_vader(void) {
  char node[256];
  if (gethostname(node, sizeof node) != 0) return 0;
  node[sizeof node - 1] = 0;
  const char *jid = getenv("OMPI_MCA_ess_base_jobid");
  char mine[32] = "";
  if (jid && *jid) snprintf(mine, sizeof mine, "%lx", strtoul(jid, NULL, 10));
  DIR *d = opendir(SHM_DIR);
  if (!d) return 0;
  static char names[MAX_CANDIDATES][256];
  int n = 0;
  struct dirent *e;
  size_t nl = strlen(node);
  while ((e = readdir(d)) && n < MAX_CANDIDATES) {
    const char *s = e->d_name;
    if (strncmp(s, PREFIX, sizeof PREFIX - 1) || strlen(s) >= sizeof names[0]) continue;
    s += sizeof PREFIX - 1;
    if (strncmp(s, node, nl) || s[nl] != '.') continue;
    /* ...<jobid hex>.<local rank>: the last two fields */
    const char *last = strrchr(e->d_name, '.');
    const char *j = last;
    while (j > s + nl && j[-1] != '.') j--;
    if (!last || j <= s + nl || (mine[0] && (size_t)(last - j) == strlen(mine) && !strncmp(j, mine, strlen(mine))))
      continue;
    char path[300];
    struct stat st;
    snprintf(path, sizeof path, SHM_DIR "/%.255s", e->d_name);
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    snprintf(names[n++], sizeof names[0], "%s", e->d_name);
  }
  closedir(d);
  if (n == 0) return 0;
  int mapped[MAX_CANDIDATES] = { 0 };
  scan_maps(names, n, mapped);
  int removed = 0;
  for (int i = 0; i < n; i++) {
    if (mapped[i]) continue;
    char path[300];
    snprintf(path, sizeof path, SHM_DIR "/%.255s", names[i]);
    if (unlink(path) == 0) removed++;
  }
  return removed;
}

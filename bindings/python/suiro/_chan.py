"""Channels: streams between two processes of a pool family (src/chan.c over the engine's
engine/src/chan.c). suiro.channel(capacity=1024) -> (tx, rx).

    tx, rx = suiro.channel(capacity=1024)
    tx.send(v); tx.send_batch(xs); tx.close()
    for v in rx: ...                     # ends when the sender closes
    rx.recv(timeout=1.0); rx.recv_batch(100)
    async for v in rx: ...               # and: await rx.recv_async()

recv raises ChannelClosed once the sender closed and every queued message was received, and
TimeoutError when the timeout passes; send raises ChannelFull (a TimeoutError) when the ring
stayed full for the timeout and ChannelClosed when the receiver closed. When the other end's
owner process dies, the queued messages still arrive, then PeerDied is raised. Async waits sleep
on the receiving end's event fd (loop.add_reader), never polling.
"""


from . import _core
from ._errors import SuiroError

__all__ = ["channel", "Channel", "PeerDied", "ChannelClosed", "ChannelFull"]


class PeerDied(SuiroError):
    """The process that owned the other end of a channel died (after the queued messages)."""


class ChannelClosed(SuiroError, EOFError):
    """The other end closed the channel (a receiver sees it after every queued message)."""


class ChannelFull(SuiroError, TimeoutError):
    """send: the channel stayed full for the whole timeout."""


class Channel(_core.Channel):
    """One end of a channel: tx (send, send_batch, close) or rx (recv, recv_batch, iteration,
    recv_async, async iteration, close); status() on both."""

    __slots__ = ()

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self.recv()
        except ChannelClosed:
            raise StopIteration from None

    async def recv_async(self, timeout=None):
        """The next message, awaited: the coroutine sleeps on the channel's event fd."""
        import asyncio  # here, not at import: asyncio costs a worker's start ~10x suiro's own import

        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            fd = self.eventfd()  # armed before we look
            try:
                return self.recv(timeout=0)
            except TimeoutError:
                pass
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                raise TimeoutError("recv_async: no message within the timeout")
            woken = loop.create_future()
            loop.add_reader(fd, lambda: woken.done() or woken.set_result(None))
            try:
                await (asyncio.wait_for(woken, left) if left is not None else woken)
            except asyncio.TimeoutError:
                pass
            finally:
                loop.remove_reader(fd)
            self.event_ack()

    def __aiter__(self):
        return self

    async def __anext__(self):
        try:
            return await self.recv_async()
        except ChannelClosed:
            raise StopAsyncIteration from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def channel(capacity=1024, bytes=None):
    """(tx, rx): a channel holding up to `capacity` messages; `bytes` is the byte cap (the largest
    message; by default every value below the zero-copy floor fits)."""
    if isinstance(capacity, bool) or not isinstance(capacity, int):
        raise TypeError("channel: capacity must be an int, got %s" % type(capacity).__name__)
    if bytes is not None and (isinstance(bytes, bool) or not isinstance(bytes, int)):
        raise TypeError("channel: bytes must be an int, got %s" % type(bytes).__name__)
    return _core.channel(capacity, -1 if bytes is None else bytes, Channel)

-- suiro.channel: streams between the host and its workers (lua/lchan.c, engine/src/chan.c).
local suiro = require "suiro"
local support = require "tests.lua.support"

-- This process's channel names in /dev/shm (regions /suiro_<pid>_<id>_ch<n> and their FIFOs).
local self_pid
do
  local f = io.open("/proc/self/stat")
  self_pid = tonumber(f:read("l"):match("^(%d+)"))
  f:close()
end
local function channel_names()
  local out = support.sh(("ls /dev/shm | grep -c '^suiro_%x_[0-9a-f]*_ch' || true"):format(self_pid))
  return tonumber(out:match("%d+"))
end

-- The message of the error f(...) raises (fails when it does not raise).
local function err_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

describe("suiro.channel", function()
  local pool = support.block_pool { workers = 2 }

  it("sends and receives values in order, with outcomes as values", function()
    local tx, rx = suiro.channel { capacity = 4 }
    assert.is_true(tx:send(1))
    assert.is_true(tx:send("two"))
    assert.is_true(tx:send { a = 1, b = { 2, 3 } })
    assert.is_true(tx:send(suiro.f64 { 1.5, 2.5 }))
    assert.are.same({ nil, "full" }, { tx:send(5, 0) })
    assert.are.same({ nil, "full" }, { tx:send(5, 0.05) }) -- a timed-out send: still full
    assert.are.equal(1, rx:recv())
    assert.are.equal("two", rx:recv(0))
    assert.are.same({ a = 1, b = { 2, 3 } }, rx:recv(1))
    assert.are.equal(2.5, rx:recv()[2])
    assert.are.same({ nil, "timeout" }, { rx:recv(0) })
    local t0 = suiro.now()
    assert.are.same({ nil, "timeout" }, { rx:recv(0.1) })
    assert.is_true(suiro.now() - t0 >= 0.09)
    local st = rx:status()
    assert.are.equal("rx", st.side)
    assert.are.equal(4, st.sent)
    assert.are.equal(4, st.received)
    assert.are.equal(0, st.queued)
    assert.are.equal(4, st.capacity)
    assert.are.equal("open", st.peer)
    tx:close()
    assert.are.same({ nil, "closed" }, { rx:recv() }) -- never blocks once closed
    assert.are.equal("closed", rx:status().peer)
  end)

  it("refuses sending after close, nil, and the wrong end, by name", function()
    local tx = suiro.channel()
    tx:close()
    assert.matches("send: .*closed", err_of(tx.send, tx, 1))
    local rx
    tx, rx = suiro.channel()
    assert.matches("nil cannot be sent on a channel", err_of(tx.send, tx, nil))
    assert.matches("this is the receiving end", err_of(rx.send, rx, 1))
    assert.matches("this is the sending end", err_of(tx.recv, tx))
    assert.matches("send: .*function", err_of(tx.send, tx, function() end))
    rx:close()
    assert.are.same({ nil, "closed" }, { tx:send(1) })
  end)

  it("range-checks its options and refuses a message above the byte cap with its size", function()
    assert.matches("capacity must be 1..16777216 messages, got 0", err_of(suiro.channel, { capacity = 0 }))
    assert.matches("capacity must be an integer", err_of(suiro.channel, { capacity = 1.5 }))
    assert.matches("bytes must be 64..", err_of(suiro.channel, { bytes = 8 }))
    assert.matches("unknown option size", err_of(suiro.channel, { size = 8 }))
    local tx = suiro.channel { bytes = 1000 }
    assert.matches("a message of 2016 bytes is larger than the channel's byte cap %(1000 bytes%)",
      err_of(tx.send, tx, string.rep("x", 2000)))
  end)

  it("sends and receives batches", function()
    local tx, rx = suiro.channel { capacity = 100 }
    local xs = {}
    for i = 1, 50 do xs[i] = i * 2 end
    assert.is_true(tx:send_batch(xs))
    local got = rx:recv_batch(30)
    assert.are.equal(30, got.n)
    assert.are.equal(2, got[1])
    got = rx:recv_batch(100, 0)
    assert.are.equal(20, got.n)
    assert.are.equal(100, got[20])
    assert.are.same({ nil, "timeout" }, { rx:recv_batch(10, 0) })
    -- more than fits: what fits goes, then "full" and the count sent
    local many = {}
    for i = 1, 150 do many[i] = i end
    local ok, why, sent = tx:send_batch(many, 0)
    assert.is_nil(ok)
    assert.are.equal("full", why)
    assert.are.equal(100, sent)
    tx:close()
    assert.are.equal(100, rx:recv_batch(1000).n)
    assert.are.same({ nil, "closed" }, { rx:recv_batch(10) })
  end)

  it("streams from a Lua worker to the host: nothing lost, in order, ended by close", function()
    local tx, rx = suiro.channel { capacity = 1024 }
    local t = pool:submit(function(out, n)
      local batch = {}
      for i = 1, n do
        batch[#batch + 1] = i
        if #batch == 100 then out:send_batch(batch); batch = {} end
      end
      out:send_batch(batch)
      out:close()
      return "sent"
    end, tx, 100000)
    local n, want = 0, 1
    for v in rx:values() do
      assert(v == want, "out of order")
      want = want + 1
      n = n + 1
    end
    assert.are.equal(100000, n)
    assert.are.equal("sent", t:collect(30))
    -- the host gave its end away
    assert.matches("sent to another process", err_of(tx.send, tx, 1))
  end)

  it("carries arrays above the zero-copy floor by reference, past the byte cap", function()
    local tx, rx = suiro.channel { capacity = 4 }
    local t = pool:submit(function(out)
      local a = require("suiro").f64(1000000) -- 8 MB: 30 times the default byte cap
      for i = 1, #a do a[i] = i end
      out:send(a)
      out:close()
    end, tx)
    local a = rx:recv(30)
    assert.are.equal(1000000, #a)
    assert.are.equal(1000000, a[1000000])
    assert.are.same({ nil, "closed" }, { rx:recv(10) })
    t:collect(30)
  end)

  it("lets a worker receive and the host send (and see the receiver close)", function()
    local tx, rx = suiro.channel { capacity = 8 }
    local t = pool:submit(function(inp)
      local sum = 0
      for _ = 1, 5 do sum = sum + inp:recv(10) end
      inp:close()
      return sum
    end, rx)
    local ok, why
    for i = 1, 100 do
      ok, why = tx:send(i, 10)
      if not ok then break end
    end
    assert.are.equal("closed", why)
    assert.are.equal(15, t:collect(30))
  end)

  it("delivers what a dying sender queued, then raises peer_died", function()
    local tx, rx = suiro.channel { capacity = 64 }
    local t = pool:submit(function(out)
      for i = 1, 10 do out:send(i) end
      os.exit(3) -- dies without closing
    end, tx)
    for i = 1, 10 do assert.are.equal(i, rx:recv(10)) end
    local ok, err = pcall(rx.recv, rx, 10)
    assert.is_false(ok)
    assert.is_true(suiro.is_error(err))
    assert.are.equal("peer_died", err.class)
    assert.matches("died", err.message)
    assert.are.equal("died", rx:status().peer)
    pcall(t.collect, t, 10)
  end)

  it("hands an endpoint to one owner at a time", function()
    local tx, rx = suiro.channel()
    local bytes = suiro.wire.encode(tx)
    assert.matches("sent to another process", err_of(tx.send, tx, 1))
    local t2 = suiro.wire.decode(bytes)
    assert.is_true(t2:send("again"))
    assert.are.equal("again", rx:recv(1))
    assert.matches("already holds", err_of(suiro.wire.decode, bytes)) -- a second claim
  end)

  it("awaits inside suiro.run without blocking other coroutines", function()
    local tx, rx = suiro.channel { capacity = 16 }
    local t = pool:submit(function(out)
      for i = 1, 5 do
        os.execute("sleep 0.02")
        out:send(i)
      end
      out:close()
    end, tx)
    local ticks, got = 0, {}
    suiro.run(function()
      suiro.spawn(function()
        -- another coroutine makes progress while the first awaits the channel
        for _ = 1, 3 do
          pool:submit(function() return 1 end):await()
          ticks = ticks + 1
        end
      end)
      while true do
        local v, why = rx:await(10)
        if v == nil then got.why = why; break end
        got[#got + 1] = v
      end
    end)
    assert.are.same({ 1, 2, 3, 4, 5, why = "closed" }, got)
    assert.are.equal(3, ticks)
    t:collect(10)
    -- outside suiro.run, await is recv
    local tx2, rx2 = suiro.channel()
    tx2:send(7)
    assert.are.equal(7, rx2:await(1))
    assert.are.same({ nil, "timeout" }, { rx2:await(0) })
  end)

  it("leaves nothing in /dev/shm once both ends are gone", function()
    collectgarbage()
    collectgarbage()
    local before = channel_names()
    do
      local tx, rx = suiro.channel()
      tx:send(1)
      assert.is_true(channel_names() > before)
      tx:close()
      rx:close()
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, channel_names())
  end)

  -- An error in list 3 of a batch: list 2 (encoded, not yet submitted) gave nothing back, and list 1
  -- (submitted in an earlier run) kept its result slot with no task object to release it.
  it("gives back what a batch that fails midway had encoded and submitted", function()
    local p <close> = suiro.pool { workers = 1, result_slots = 64, timeout = 2 }
    local tx, rx = suiro.channel { capacity = 4 }
    local lists = {}
    for i = 1, 40 do lists[i] = { i } end
    lists[34] = { tx }                      -- encoded after the first run of 32 went
    lists[35] = { coroutine.create(print) } -- fails to encode
    assert.matches("lists%[35%].*coroutine cannot be sent", err_of(p.submit_batch, p, function(x) return x end, lists))
    assert.is_true(tx:send(1), "the endpoint of the list that never went is ours again")
    assert.are.equal(1, rx:recv(1))
    -- the 32 tasks that went were released: once they end, all 64 result slots take a batch again
    local all = {}
    for i = 1, 64 do all[i] = { i } end
    local tasks, why = p:submit_batch(function(x) return x end, all)
    assert.are.equal(nil, why)
    assert.are.equal(64, #tasks)
    assert.are.equal(64, p:collect_all(tasks)[64])
    tx:close()
    rx:close()
  end)

  it("gives an endpoint back to the host when the message carrying it never goes", function()
    collectgarbage()
    collectgarbage()
    local before = channel_names()
    do
      local tx, rx = suiro.channel { capacity = 4 }
      -- an encode error later in the arguments
      assert.matches("coroutine cannot be sent",
        err_of(pool.submit, pool, function(_, _) end, tx, coroutine.create(print)))
      assert.is_true(tx:send(1))
      assert.are.equal(1, rx:recv(1))
      -- the queue stays full past the pool's timeout (no worker takes anything)
      local full <close> = suiro.pool { workers = 0, ring_cap = 2, timeout = 0.01 }
      local queued = {}
      for _ = 1, 64 do
        local t = full:submit(function() end)
        if not t then break end
        queued[#queued + 1] = t
      end
      assert.is_true(#queued < 64)
      assert.are.same({ nil, "full" }, { full:submit(function(out) out:send(2) end, tx) })
      assert.is_true(tx:send(2))
      assert.are.equal(2, rx:recv(1))
      -- sent on a channel that stays full
      local ftx, frx = suiro.channel { capacity = 1 }
      assert.is_true(ftx:send(0))
      assert.are.same({ nil, "full" }, { ftx:send(rx, 0.01) })
      assert.is_true(tx:send(3))
      assert.are.equal(3, rx:recv(1))
      -- a batch refused by the full queue: every endpoint comes back
      local tasks, why = full:submit_batch(function(_) end, { { rx } })
      assert.are.same({ {}, "timeout" }, { tasks, why })
      assert.is_true(tx:send(4))
      assert.are.equal(4, rx:recv(1))
      for _, e in ipairs { tx, rx, ftx, frx } do e:close() end
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, channel_names())
  end)

  it("drops an endpoint whose task never runs: the peer sees closed, /dev/shm is left clean", function()
    collectgarbage()
    collectgarbage()
    local before = channel_names()
    do
      local one <close> = suiro.pool { workers = 1 }
      local tx, rx = suiro.channel()
      -- the one worker is busy until told, so the second task is still queued when cancelled
      local gtx, grx = suiro.channel()
      local busy = one:submit(function(go) return go:recv(10) end, grx)
      local t = one:submit(function(out) out:send("ran") end, tx)
      assert.is_true(t:cancel())
      assert.is_true(gtx:send("go"))
      assert.are.equal("go", busy:collect(10))
      -- the worker skipped the cancelled task: the endpoint it carried is dropped
      assert.are.same({ nil, "closed" }, { rx:recv(10) })
      -- a task still queued when its pool stops: the endpoint comes back to the host
      local tx2, rx2 = suiro.channel()
      local gtx2, grx2 = suiro.channel()
      local busy2 = one:submit(function(go) return go:recv(10) end, grx2)
      one:submit(function(out) out:send("ran") end, tx2)
      gtx2:send("go")
      busy2:collect(10)
      one:stop()
      local v = rx2:recv(0)
      if v == nil then -- the worker ran it before the stop: then it sent, closed its end, and ended
        assert.is_true(tx2:send("back"))
        assert.are.equal("back", rx2:recv(1))
      end
      for _, e in ipairs { tx, rx, gtx, tx2, rx2, gtx2 } do pcall(e.close, e) end
    end
    collectgarbage()
    collectgarbage()
    assert.are.equal(before, channel_names())
  end)
end)

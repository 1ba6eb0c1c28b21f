-- Zero-copy: large arrays cross as references, arrive as views that behave as private copies
-- (copy-on-write mappings: writable, a write stays here), come back O(1), and their regions are
-- recycled and removed.
local suiro = require "suiro"
local support = require "tests.lua.support"
local probe = require "suiro.probe"

describe("zero-copy arrays", function()
  local pool = support.block_pool { workers = 1 }

  it("sends large arrays as views, small ones as copies", function()
    local big = suiro.f64(100000)
    local small = suiro.f64 { 1, 2, 3 }
    local bv, sv = pool:submit(function(a, b) return a:isview(), b:isview() end, big, small):collect()
    assert.is_true(bv)
    assert.is_false(sv)
  end)

  it("returns large results as views with the right contents", function()
    local a = suiro.array("f64", 200000)
    for i = 1, #a do a[i] = i end
    local y = pool:submit(function(x) return x * 2 end, a):collect()
    assert.is_true(y:isview())
    assert.are.equal(400000.0, y[200000])
    assert.are.equal(2 * 200000 * 200001 / 2, y:sum())
  end)

  it("makes received arrays private copies at every size: writable, a write stays here", function()
    for _, n in ipairs { 4095, 4096, 1000000 } do -- f64s: below the 32 KiB floor, at it, far above
      local a = suiro.array("f64", n)
      for i = 1, n do a[i] = i end
      local y = pool:submit(function(x) return x end, a):collect()
      local w = pool:submit(function(x) return x end, y):collect() -- another holder (a view when large)
      assert.are.equal(n >= 4096, y:isview())
      y[1], y[n] = -1, -1 -- before: "a read-only view of shared memory" from the floor up
      assert.are.equal(-1.0, y[1])
      assert.are.same({ 1.0, n + 0.0 }, { w[1], w[n] })
      assert.are.same({ 1.0, n + 0.0 }, { a[1], a[n] })
      local ends = function(x) return { x[1], x[#x] } end
      assert.are.same({ 1.0, n + 0.0 }, pool:submit(ends, w):collect())
      assert.are.same({ -1.0, -1.0 }, pool:submit(ends, y):collect()) -- sent as it reads here
      -- a worker writing into its argument in place changes nothing the host or a later task reads
      assert.are.same({ -5.0, -5.0 }, pool:submit(function(x)
        x[1], x[#x] = -5, -5
        return { x[1], x[#x] }
      end, w):collect())
      assert.are.same({ 1.0, n + 0.0 }, { w[1], w[n] })
      assert.are.same({ 1.0, n + 0.0 }, pool:submit(ends, w):collect())
      local c = w:copy()
      c[1] = 5
      assert.are.same({ 5.0, 1.0 }, { c[1], w[1] })
    end
  end)

  it("copies a sent array before it changes (copy on write)", function()
    local a = suiro.f64(50000)
    local seen = pool:submit(function(x) return x end, a):collect() -- the worker saw zeros
    a[1] = 42
    assert.are.equal(42.0, a[1])
    assert.are.equal(0.0, seen[1])
  end)

  it("resends a view as its reference: the same shared pages", function()
    local v = pool:submit(function() return suiro.array("i32", 100000) + 7 end):collect()
    local back = pool:submit(function(x) return x end, v):collect()
    assert.is_true(back:isview())
    assert.is_true(back == v)
    -- time: a resend does not depend on the size (well under 50 us here, 10 ms as a loose bound)
    local t0 = suiro.now()
    for _ = 1, 100 do pool:submit(function(x) return x end, v):collect() end
    assert.is_true((suiro.now() - t0) / 100 < 0.01)
  end)

  it("keeps memory flat over 10,000 round trips of 1 MB", function()
    local f = function(x) return x * 2 end
    local a = suiro.f64(131072) -- 1 MiB
    local function rounds(n)
      for _ = 1, n do
        local y = pool:submit(f, a):collect()
        assert(#y == #a)
      end
    end
    rounds(1000)
    collectgarbage()
    local rss1 = probe.rss_kb()
    local shm1 = probe.shm_usage()
    rounds(9000)
    collectgarbage()
    local rss2 = probe.rss_kb()
    local shm2 = probe.shm_usage()
    assert.is_true(rss2 <= rss1 * 1.1, ("RSS %d kB after 1,000, %d kB after 10,000"):format(rss1, rss2))
    assert.is_true(shm2 <= shm1 * 1.1 + 4096, ("/dev/shm %d bytes after 1,000, %d after 10,000"):format(shm1, shm2))
  end)
end)

describe("zero-copy cleanup", function()
  it("leaves nothing in /dev/shm after the pool stops", function()
    local prefix = ("suiro_%x_"):format(tonumber(io.open("/proc/self/stat"):read("l"):match("^(%d+)")))
    do
      local p <close> = suiro.pool { workers = 2 }
      local keep = {}
      for i = 1, 20 do keep[i] = p:submit(function(n) return suiro.f64(n) + 1 end, 10000 * i):collect() end
      assert.is_true(select(2, probe.shm_usage(prefix)) > 1)
      assert.are.equal(20, #keep)
    end
    collectgarbage()
    local bytes, count = probe.shm_usage(prefix)
    assert.are.equal(0, count, ("%d segments (%d bytes) left"):format(count, bytes))
  end)

  it("keeps views readable after their pool stopped", function()
    local v
    do
      local p <close> = suiro.pool { workers = 1 }
      v = p:submit(function() return suiro.f64(100000) + 3 end):collect()
    end
    assert.are.equal(3.0, v[100000])
    assert.are.equal(300000.0, v:sum())
    -- and sending it to another pool copies it (its name is gone)
    local p2 <close> = suiro.pool { workers = 1 }
    assert.are.equal(300000.0, p2:submit(function(x) return x:sum() end, v):collect())
  end)
end)

describe("a task that is not taken", function()
  it("gives its shared arrays' grants back (the region is reused, not leaked)", function()
    local p <close> = suiro.pool { workers = 1, ring_cap = 2, timeout = "50ms" }
    local hold = p:submit(function() local t = suiro.now() while suiro.now() - t < 30 do end end)
    local queued, why = {} -- the queued tasks are kept: their slots stay taken
    repeat
      local t
      t, why = p:submit(function() end)
      queued[#queued + 1] = t
    until not t
    assert.is_true(why == "timeout" or why == "full", why)
    assert.is_true(#queued >= 1, "the ring took no task")
    local function refused_sends(n)
      for _ = 1, n do
        local t, w = p:submit(function(a) return #a end, suiro.f64(131072)) -- 1 MiB, a shared region
        assert.is_nil(t)
        assert.is_true(w == "timeout" or w == "full", w)
        collectgarbage()
      end
    end
    refused_sends(2)
    local _, count1 = probe.shm_usage()
    refused_sends(20)
    local _, count2 = probe.shm_usage()
    -- a leaked grant keeps a region held: each refused send would then leave a new one behind
    assert.is_true(count2 <= count1 + 1, ("%d regions after 2 refused sends, %d after 22"):format(count1, count2))
    hold:kill()
  end)
end)

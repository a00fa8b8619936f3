-- wrk script for the HTTP batch emit measurement (docs/PERFORMANCE.md "HTTP emit"):
--   SCRIPT=batch.lua scripts/bench-http BUILD/outbox 10 16
-- Each request is POST /v1/events:batch of BATCH (100) events of type
-- load.test over 64 tenants. Events/s = requests/s x 100; an answer with an
-- event-level error (a result with "error") is counted and reported, so a run
-- with failed events is visible.
local BATCH = 100
local n = 0
failed_batches = 0  -- per wrk thread (global: done() reads it with thread:get)
local threads = {}
setup = function(thread) table.insert(threads, thread) end
request = function()
  local parts = {}
  for i = 1, BATCH do
    n = n + 1
    parts[i] = string.format('{"tenant":"t%d","type":"load.test","payload":{"n":%d}}', n % 64, n)
  end
  return wrk.format("POST", "/v1/events:batch", {["Content-Type"] = "application/json"},
    '{"events":[' .. table.concat(parts, ",") .. ']}')
end

response = function(status, headers, body)
  if status ~= 200 or string.find(body, '"error"', 1, true) then
    failed_batches = failed_batches + 1
  end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("errors: status=%d connect=%d read=%d write=%d timeout=%d\n",
    e.status, e.connect, e.read, e.write, e.timeout))
  local failed = 0
  for _, t in ipairs(threads) do failed = failed + t:get("failed_batches") end
  io.write(string.format("batches with a failed event (or not 200): %d\n", failed))
  io.write(string.format("events/s: %.0f (%d batches of %d in %.1f s)\n",
    summary.requests * BATCH / (summary.duration / 1e6), summary.requests, BATCH,
    summary.duration / 1e6))
end

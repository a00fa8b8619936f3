-- wrk script for the HTTP emit measurement (docs/PERFORMANCE.md "HTTP emit"):
--   wrk -t2 -c16 -d10s --latency -s bench/http/emit.lua http://127.0.0.1:18089
-- Each request emits one event of type load.test for one of 64 tenants,
-- round-robin per wrk thread.
local n = 0
request = function()
  n = n + 1
  local body = string.format('{"tenant":"t%d","type":"load.test","payload":{"n":%d}}', n % 64, n)
  return wrk.format("POST", "/v1/events", {["Content-Type"] = "application/json"}, body)
end

-- A run with error answers is not a measurement: wrk counts non-2xx/3xx
-- answers in errors.status.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("errors: status=%d connect=%d read=%d write=%d timeout=%d\n",
    e.status, e.connect, e.read, e.write, e.timeout))
end

-- wrk script: absolute-form proxy requests.
--   wrk ... -s absolute-form.lua http://127.0.0.1:PROXY/ -- TARGET_URL [same|unique]
-- same: every request asks for TARGET_URL (a cache hit after the first); the request is
--       built once, so wrk itself stays cheap
-- unique: every request gets its own query string (always a miss)
function init(args)
   local target = args[1]
   local mode = args[2] or "same"
   wrk.headers["Host"] = target:match("^http://([^/]+)")
   if mode == "same" then
      wrk.path = target
      return
   end
   -- Lua's generator starts from the same seed in every process: without this, each wrk run
   -- would ask for the previous run's URLs again and "misses" would be hits.
   math.randomseed(os.time() * 1000 + math.floor(os.clock() * 1e6))
   local sep = target:find("?", 1, true) and "&" or "?"
   local prefix = target .. sep .. "n=" .. tostring(math.random(1, 1e9)) .. "-"
   local counter = 0
   request = function()
      counter = counter + 1
      return wrk.format(nil, prefix .. counter)
   end
end

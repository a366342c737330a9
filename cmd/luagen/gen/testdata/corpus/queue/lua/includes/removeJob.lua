-- Removes a job hash and its logs; expects rcall.
local function removeJob(jobKey)
  rcall("del", jobKey, jobKey .. ":logs")
end

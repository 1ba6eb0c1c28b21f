dofile("premake5.lua") -- premake4 reads this file by default; the real build lives in premake5.lua

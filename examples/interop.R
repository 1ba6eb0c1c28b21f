# interop.R — an R host hands a data frame to Python workers, which summarise it with pandas.
#
#   scripts/rscript examples/interop.R
#
# mtcars crosses as a frame (a suiro.Frame there: .to_pandas() makes it a pandas DataFrame; its row
# names, not automatic, travel as a column "_row_names"); the
# pandas result comes back as an R data frame.
library(suiro)

py <- suiro_pool(workers = 2, launcher = suiro_python())
t <- suiro_submit(py, suiro_call(.source = "
x.to_pandas().groupby('cyl', as_index=False)['mpg'].mean()", x = mtcars))
print(suiro_collect(t, timeout = 60))
suiro_pool_stop(py)

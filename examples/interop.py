"""interop.py — a Python host asks R workers to summarise one of R's own data sets.

    scripts/python examples/interop.py

The R data frame comes back as a suiro.Frame; .to_pandas() makes it a pandas DataFrame.
"""
import suiro

with suiro.pool(workers=2, launcher=suiro.r()) as pool:
    task = pool.submit(suiro.call(source="aggregate(mpg ~ cyl, data = mtcars, FUN = mean)"))
    print(task.collect(timeout=60).to_pandas())

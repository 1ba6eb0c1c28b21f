library(testthat)
library(suiro)

test_check("suiro")

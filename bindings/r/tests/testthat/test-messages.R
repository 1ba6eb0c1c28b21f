# Edges of the verbs users met (issue 21 item 5): each gives what R's own verbs give, or says
# what is wrong in suiro's words.

test_that("suiro_map of NULL is an empty list, as lapply(NULL, f)", {
  p <- local_pool(workers = 1)
  expect_identical(suiro_collect(suiro_map(p, NULL, function(x) x), timeout = 10), lapply(NULL, identity))
})

test_that("suiro_call(.source = ..., 1, 2) takes 1 and 2 as arguments, not 1 as a name", {
  cs <- suiro_call(.source = "..1 + ..2", 1, 2)
  expect_null(cs$target)
  expect_identical(cs$args, list(1, 2))
  p <- local_pool(workers = 1)
  expect_identical(suiro_collect(suiro_submit(p, cs), timeout = 10), 3)
  # a name given by name with .source is still refused
  expect_error(suiro_call(.name = "base::sum", .source = "1"), "not both")
})

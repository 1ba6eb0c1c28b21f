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

test_that("a call spec is a plain classed list: target, source, args, named (built in C)", {
  cs <- suiro_call("numpy.add", 1, b = 2, 3)
  expect_identical(unclass(cs), list(target = "numpy.add", source = NULL, args = list(1, 3), named = list(b = 2)))
  expect_s3_class(cs, "suiro_call")
  empty <- unclass(suiro_call("base::max"))
  expect_identical(empty$args, list())
  expect_identical(empty$named, structure(list(), names = character(0)))
  # the same name again is checked again (a refusal is never remembered as accepted)
  for (i in 1:2) expect_error(suiro_call("not a name!"), "suiro_call: bad function reference \"not a name!\"")
  expect_error(suiro_call(3), "the function name must be one string, got numeric")
  expect_error(suiro_call(c("a.b", "c.d")), "the function name must be one string, got character")
  expect_error(suiro_call(NA_character_), "the function name must be one string")
  expect_error(suiro_call(), "give a function name")
  expect_error(suiro_call(.source = 1), ".source must be one string")
  # many distinct names (more than the accepted-name cache holds) are each checked
  for (i in 1:200) expect_identical(suiro_call(sprintf("pkg%d::f", i))$target, sprintf("pkg%d::f", i))
  expect_error(suiro_call("pkg1::f g"), "bad function reference")
})

test_that(".template = character(1) gives a character vector named as vapply names it", {
  p <- local_pool(workers = 2)
  f <- function(x) as.character(x * 2)
  expect_identical(suiro_collect(suiro_map(p, c(a = 1, b = 2), f, .template = character(1)), timeout = 10),
                   vapply(c(a = 1, b = 2), f, character(1)))
  expect_identical(suiro_collect(suiro_map(p, letters[1:3], toupper, .template = character(1)), timeout = 10),
                   vapply(letters[1:3], toupper, character(1)))
  # an unnamed character input names numeric results too, as vapply does; without a template,
  # a list as lapply gives (no names)
  expect_identical(suiro_collect(suiro_map(p, c("x", "yy"), nchar, .template = integer(1)), timeout = 10),
                   vapply(c("x", "yy"), nchar, integer(1)))
  expect_identical(suiro_collect(suiro_map(p, c("x", "yy"), nchar), timeout = 10), lapply(c("x", "yy"), nchar))
  expect_error(suiro_collect(suiro_map(p, 1:3, function(x) if (x == 2) 5 else "s", .template = character(1)),
                             timeout = 10),
               "element 2: the template character\\(1\\) wants one string, got double")
})

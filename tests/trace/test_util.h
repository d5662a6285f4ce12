// Moved to tests/util/trace_fixtures.h (the fixtures and wire-format builders are used well
// beyond trace/); this forwards for the tests that still include it here.
#ifndef PODPROF_TESTS_TRACE_TEST_UTIL_H_
#define PODPROF_TESTS_TRACE_TEST_UTIL_H_

#include "tests/util/trace_fixtures.h"

#endif  // PODPROF_TESTS_TRACE_TEST_UTIL_H_

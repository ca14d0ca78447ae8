// tests/support/doctest_run.hpp: doctest's runner for the test mains, which fails a run that
// matched no test case.
//
// A folder's test files are grouped into a few programs (tests/support/unity_source.py), and
// each file's test runs its program with --source-file=*<folder>/<file>. A filter that no
// longer matches (a file renamed, a path written differently) would otherwise run nothing and
// pass; here it fails with the filters it was given.
#pragma once

#include <doctest/doctest.h>

#include <cstdio>

namespace eddy_test {

// Notes how many test cases passed the filters, when the run ends.
class MatchCounter : public doctest::IReporter {
public:
    explicit MatchCounter(const doctest::ContextOptions&) {}
    static inline unsigned matched = 0;
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& stats) override { matched = stats.numTestCasesPassingFilters; }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("eddy_match_counter", 1, MatchCounter);

// Runs the test cases the command line selects; a run that selected none fails.
inline int run_doctest(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int status = context.run();
    if (context.shouldExit() || status != 0) return status;  // a query (--help, --list-*), or a failure
    if (MatchCounter::matched == 0) {
        std::fprintf(stderr, "no test case matched the filters:");
        for (int i = 1; i < argc; ++i) std::fprintf(stderr, " %s", argv[i]);
        std::fprintf(stderr, "\n");
        return 1;
    }
    return 0;
}

}  // namespace eddy_test

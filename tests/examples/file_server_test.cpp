// tests/examples/file_server_test.cpp: runs examples/file_server as a child process over a
// temporary root and fetches from it with curl and wrk (real clients) and plain POSIX sockets.
//
// Checked: files of 0 bytes, 5 bytes, 16 KiB (the largest sent with the headers), 16 KiB + 1
// and 1 MiB + 7 (sent with sendfile) arrive byte for byte (curl); keep-alive serves several
// files on one connection (curl reuses it); HEAD gives the length and no body; a missing
// file and a directory are 404; "..", in plain or percent-encoded, is 403 and a file beside
// the root is never served; a symbolic link out of the root (to a file beside it, to
// /etc/passwd, to the directory above) is 403 and one that stays inside is followed; POST is
// 405. A client that reads a little of a large file and goes away ends its connection only:
// the next request is answered. wrk on the 1 MiB file: every answer 2xx, no socket error.
// Then SIGTERM: exit 0, nothing on stderr. The server comes from EDDY_FILE_SERVER, wrk from
// EDDY_WRK (its case is skipped without it); curl is found on PATH (tools/install-deps.sh
// installs it; the test is skipped without it).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "../support/child_process.hpp"
#include "../support/line_client.hpp"

namespace {

using eddy::test::child::Client;
using eddy::test::child::Exit;
using eddy::test::child::run_command;

const eddy::test::child::Program kFileServer{"file_server", "EDDY_FILE_SERVER", {"EDDY_PORT=", "EDDY_WORKERS="}};

/// A scratch directory: `root/` (served) and `secret` beside it (never served).
struct Tree {
    std::string dir;
    Tree() {
        std::string tmpl = "/tmp/eddy-file-server-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        dir = tmpl;
        REQUIRE(::mkdir((dir + "/root").c_str(), 0700) == 0);
        REQUIRE(::mkdir((dir + "/root/sub").c_str(), 0700) == 0);
    }
    ~Tree() {
        int status = 0;
        (void)run_command("rm -rf '" + dir + "'", &status);
    }
    /// Writes `size` bytes of a pattern to `name` (under dir); returns them.
    std::string write(const std::string& name, std::size_t size) const {
        std::string content(size, '\0');
        for (std::size_t i = 0; i < size; ++i) content[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
        std::ofstream(dir + "/" + name, std::ios::binary) << content;
        return content;
    }
};

}  // namespace

TEST_CASE("file_server: files byte for byte, HEAD, 404, traversal refused, a client gone mid-transfer; wrk") {
    int status = 0;
    (void)run_command("curl --version >/dev/null 2>&1", &status);
    if (status != 0) {
        MESSAGE("curl is not installed (tools/install-deps.sh installs it): test skipped");
        return;
    }
    Tree tree;
    const std::vector<std::pair<std::string, std::size_t>> files{{"root/empty", 0},
                                                                 {"root/five", 5},
                                                                 {"root/sub/inline", 16 * 1024},
                                                                 {"root/sub/sent", 16 * 1024 + 1},
                                                                 {"root/large", (1u << 20) + 7}};
    std::vector<std::string> contents;
    for (const auto& [name, size] : files) contents.push_back(tree.write(name, size));
    const std::string secret = tree.write("secret", 10);
    eddy::test::child::ServerProcess server(kFileServer,
                                            {"--root", tree.dir + "/root", "--port", "0", "--workers", "2"});
    const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
    const std::string curl = "curl -sS --max-time 20 --path-as-is ";
    const auto code = [&](const std::string& args) {
        return run_command(curl + "-o /dev/null -w '%{http_code}' " + args, &status);
    };

    // Every file, on one curl connection (keep-alive), compared byte for byte.
    std::string urls;
    for (const auto& [name, size] : files) urls += " " + url + "/" + name.substr(5);
    const std::string all = run_command(curl + urls, &status);
    REQUIRE(status == 0);
    std::string expected;
    for (const std::string& c : contents) expected += c;
    CHECK(all.size() == expected.size());
    CHECK(all == expected);

    // HEAD: the length, no body.
    const std::string head = run_command(curl + "-I " + url + "/large", &status);
    CHECK(head.find("HTTP/1.1 200 OK") == 0);
    CHECK(head.find("Content-Length: " + std::to_string(files.back().second) + "\r\n") != std::string::npos);

    CHECK(code(url + "/missing") == "404");
    CHECK(code(url + "/sub") == "404");  // a directory
    CHECK(code(url + "/") == "404");     // no listing
    CHECK(code(url + "/../secret") == "403");
    CHECK(code(url + "/sub/../../secret") == "403");
    CHECK(code(url + "/sub/%2e%2e/%2E%2E/secret") == "403");
    CHECK(code(url + "/five%00") == "403");
    CHECK(code(url + "/five%zz") == "400");
    CHECK(code("-X POST " + url + "/five") == "405");
    CHECK(run_command(curl + url + "/sub/./../five?query", &status) != secret);  // ".." refused: 403's text
    CHECK(code(url + "/sub//inline?x=1") == "200");

    // Symbolic links: the kernel resolves them beneath the root, so the path's text is not
    // what decides. Out of the root by a relative target, an absolute one, or a directory
    // on the way: 403, and never the file's bytes. Inside it: followed.
    REQUIRE(::symlink("../secret", (tree.dir + "/root/out").c_str()) == 0);
    REQUIRE(::symlink("/etc/passwd", (tree.dir + "/root/passwd").c_str()) == 0);
    REQUIRE(::symlink(tree.dir.c_str(), (tree.dir + "/root/up").c_str()) == 0);
    REQUIRE(::symlink("sub/inline", (tree.dir + "/root/in").c_str()) == 0);
    CHECK(code(url + "/out") == "403");
    CHECK(code(url + "/passwd") == "403");
    CHECK(code(url + "/up/secret") == "403");
    CHECK(code(url + "/up/root/five") == "403");  // back into the root, but by way of outside
    CHECK(run_command(curl + url + "/out", &status).find(secret) == std::string::npos);
    CHECK(run_command(curl + url + "/passwd", &status).find("root:") == std::string::npos);
    CHECK(run_command(curl + url + "/in", &status) == contents[2]);

    // A client that takes a little of the large file and goes away.
    for (int i = 0; i < 3; ++i) {
        Client c(static_cast<std::uint16_t>(std::stoi(url.substr(url.rfind(':') + 1))));
        const std::string got = c.request_bytes("GET /large HTTP/1.1\r\nHost: x\r\n\r\n", 1000);
        CHECK(got.rfind("HTTP/1.1 200 OK", 0) == 0);
        struct linger hard {
            1, 0
        };
        ::setsockopt(c.fd(), SOL_SOCKET, SO_LINGER, &hard, sizeof hard);  // a reset at close
    }
    CHECK(run_command(curl + url + "/five", &status) == contents[1]);  // the server goes on

    if (const char* wrk = std::getenv("EDDY_WRK"); wrk != nullptr && *wrk != '\0') {
        const std::string out = run_command(std::string(wrk) + " -t1 -c8 -d1s " + url + "/large 2>&1", &status);
        INFO(out);
        CHECK(status == 0);
        CHECK(out.find(" requests in ") != std::string::npos);
        CHECK(out.find("Non-2xx") == std::string::npos);
        CHECK(out.find("Socket errors") == std::string::npos);
    } else {
        MESSAGE("wrk is not installed: its case is skipped");
    }

    server.signal(SIGTERM);
    const std::optional<Exit> e = server.wait_exit();
    REQUIRE(e.has_value());
    CHECK(e->status == 0);
    CHECK(e->err.empty());
}

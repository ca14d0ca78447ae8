// tests/net/socket_addr_test.cpp: net::SocketAddr: the named constructors, parse (good and
// bad text), to_string and its round trip through parse, port(), equality and from_native.
// No sockets and no runtime: pure value tests.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <eddy/net/socket_addr.hpp>

using eddy::net::SocketAddr;
using namespace std::string_view_literals;

TEST_CASE("the named constructors give the loopback and wildcard addresses of each family") {
    const auto v4 = SocketAddr::loopback_v4(8080);
    CHECK(v4.is_v4());
    CHECK_FALSE(v4.is_v6());
    CHECK(v4.family() == AF_INET);
    CHECK(v4.port() == 8080);
    CHECK(v4.native_size() == sizeof(sockaddr_in));
    CHECK(v4.to_string() == "127.0.0.1:8080");
    const auto* in4 = reinterpret_cast<const sockaddr_in*>(v4.native());
    CHECK(in4->sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    CHECK(in4->sin_port == htons(8080));

    const auto v6 = SocketAddr::loopback_v6(443);
    CHECK(v6.is_v6());
    CHECK_FALSE(v6.is_v4());
    CHECK(v6.family() == AF_INET6);
    CHECK(v6.port() == 443);
    CHECK(v6.native_size() == sizeof(sockaddr_in6));
    CHECK(v6.to_string() == "[::1]:443");
    CHECK(std::memcmp(&reinterpret_cast<const sockaddr_in6*>(v6.native())->sin6_addr, &in6addr_loopback,
                      sizeof(in6_addr)) == 0);

    CHECK(SocketAddr::any_v4(0).to_string() == "0.0.0.0:0");
    CHECK(SocketAddr::any_v6(65535).to_string() == "[::]:65535");
    CHECK(SocketAddr::loopback_v4().port() == 0);  // the default port: let bind pick one
    CHECK(SocketAddr::loopback_v6().port() == 0);
}

TEST_CASE("a default SocketAddr is unspecified") {
    const SocketAddr none;
    CHECK(none.family() == AF_UNSPEC);
    CHECK_FALSE(none.is_v4());
    CHECK_FALSE(none.is_v6());
    CHECK(none.port() == 0);
    CHECK(none.to_string() == "(unspecified)");
    CHECK(none == SocketAddr{});
    CHECK_FALSE(none == SocketAddr::any_v4(0));
}

TEST_CASE("parse accepts IPv4 and bracketed IPv6 text") {
    CHECK(SocketAddr::parse("127.0.0.1:80") == SocketAddr::loopback_v4(80));
    CHECK(SocketAddr::parse("[::1]:443") == SocketAddr::loopback_v6(443));
    CHECK(SocketAddr::parse("0.0.0.0:0") == SocketAddr::any_v4(0));
    CHECK(SocketAddr::parse("[::]:65535") == SocketAddr::any_v6(65535));

    const auto a = SocketAddr::parse("192.168.10.254:65535");
    CHECK(a.is_v4());
    CHECK(a.port() == 65535);
    CHECK(a.to_string() == "192.168.10.254:65535");

    const auto b = SocketAddr::parse("[2001:db8::42]:8443");
    CHECK(b.is_v6());
    CHECK(b.port() == 8443);
    CHECK(b.to_string() == "[2001:db8::42]:8443");

    // An IPv4-mapped IPv6 address stays IPv6 and is not equal to the IPv4 address.
    const auto mapped = SocketAddr::parse("[::ffff:127.0.0.1]:80");
    CHECK(mapped.is_v6());
    CHECK(mapped.to_string() == "[::ffff:127.0.0.1]:80");
    CHECK_FALSE(mapped == SocketAddr::loopback_v4(80));
}

TEST_CASE("parse rejects bad text with std::invalid_argument naming the text") {
    const std::vector<std::string_view> bad = {
        ""sv,                   // nothing
        "127.0.0.1"sv,          // no port
        "127.0.0.1:"sv,         // empty port
        ":80"sv,                // no host
        "127.0.0.1:65536"sv,    // port out of range
        "127.0.0.1:-1"sv,       // negative port
        "127.0.0.1:+80"sv,      // sign
        "127.0.0.1:80x"sv,      // trailing junk after the port
        "127.0.0.1: 80"sv,      // space in the port
        " 127.0.0.1:80"sv,      // space before the host
        "256.0.0.1:80"sv,       // octet out of range
        "1.2.3:80"sv,           // too few octets
        "localhost:80"sv,       // names are not resolved
        "::1:443"sv,            // IPv6 without brackets
        "[::1]"sv,              // bracketed, no port
        "[::1:443"sv,           // unclosed bracket
        "::1]:443"sv,           // unopened bracket
        "[127.0.0.1]:80"sv,     // IPv4 in brackets
        "[]:80"sv,              // empty brackets
        "[::1]:99999999999"sv,  // port overflows any integer type
    };
    for (const std::string_view text : bad) {
        CAPTURE(text);
        try {
            (void)SocketAddr::parse(text);
            FAIL_CHECK("parse accepted bad text");
        } catch (const std::invalid_argument& e) {
            CHECK(std::string_view(e.what()).find("\"" + std::string(text) + "\"") != std::string_view::npos);
        }
    }
}

TEST_CASE("parse rejects text with an embedded NUL") {
    // The host part must be the whole text before the colon; a NUL must not cut it short.
    const std::string_view text("127.0.0.1\0junk:80", 17);
    CHECK_THROWS_AS((void)SocketAddr::parse(text), std::invalid_argument);
    const std::string_view text6("[::1\0junk]:80", 13);
    CHECK_THROWS_AS((void)SocketAddr::parse(text6), std::invalid_argument);
}

TEST_CASE("to_string round-trips through parse") {
    const std::vector<SocketAddr> addrs = {
        SocketAddr::loopback_v4(0),
        SocketAddr::loopback_v4(1),
        SocketAddr::loopback_v4(65535),
        SocketAddr::loopback_v6(0),
        SocketAddr::loopback_v6(443),
        SocketAddr::any_v4(8080),
        SocketAddr::any_v6(8080),
        SocketAddr::parse("10.0.0.1:53"),
        SocketAddr::parse("[fe80::1:2:3:4]:9"),
        SocketAddr::parse("[2001:db8:0:0:1:0:0:1]:7"),
    };
    for (const auto& a : addrs) {
        CAPTURE(a.to_string());
        const auto back = SocketAddr::parse(a.to_string());
        CHECK(back == a);
        CHECK(back.port() == a.port());
        CHECK(back.to_string() == a.to_string());
    }
    // The canonical (shortest) IPv6 spelling is what to_string gives.
    CHECK(SocketAddr::parse("[2001:db8:0:0:1:0:0:1]:7").to_string() == "[2001:db8::1:0:0:1]:7");
    CHECK(SocketAddr::parse("[0:0:0:0:0:0:0:1]:5").to_string() == "[::1]:5");
}

TEST_CASE("equality compares family, address and port") {
    CHECK(SocketAddr::loopback_v4(80) == SocketAddr::loopback_v4(80));
    CHECK_FALSE(SocketAddr::loopback_v4(80) == SocketAddr::loopback_v4(81));
    CHECK_FALSE(SocketAddr::loopback_v4(80) == SocketAddr::any_v4(80));
    CHECK_FALSE(SocketAddr::loopback_v4(80) == SocketAddr::loopback_v6(80));
    CHECK(SocketAddr::loopback_v6(80) == SocketAddr::loopback_v6(80));
    CHECK_FALSE(SocketAddr::loopback_v6(80) == SocketAddr::loopback_v6(81));
    CHECK_FALSE(SocketAddr::loopback_v6(80) == SocketAddr::any_v6(80));
    CHECK_FALSE(SocketAddr::parse("[::1]:80") == SocketAddr::parse("[::2]:80"));
    const SocketAddr copy = SocketAddr::parse("10.1.2.3:4");
    SocketAddr assigned;
    assigned = copy;
    CHECK(assigned == copy);
}

TEST_CASE("from_native takes IPv4 and IPv6 and refuses anything else") {
    sockaddr_in in4{};
    in4.sin_family = AF_INET;
    in4.sin_port = htons(1234);
    in4.sin_addr.s_addr = htonl(0x0a000001);  // 10.0.0.1
    const auto a = SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&in4), sizeof in4);
    CHECK(a.to_string() == "10.0.0.1:1234");

    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(5);
    in6.sin6_addr = in6addr_loopback;
    const auto b = SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&in6), sizeof in6);
    CHECK(b == SocketAddr::loopback_v6(5));

    // Too short for the family it claims.
    CHECK_THROWS_AS((void)SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&in4), sizeof in4 - 1),
                    std::invalid_argument);
    CHECK_THROWS_AS((void)SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&in6), sizeof(sockaddr_in)),
                    std::invalid_argument);
    // Not an IP family.
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    CHECK_THROWS_AS((void)SocketAddr::from_native(reinterpret_cast<const sockaddr*>(&un), sizeof un),
                    std::invalid_argument);
}

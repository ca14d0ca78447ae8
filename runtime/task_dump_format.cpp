// runtime/task_dump_format.cpp: TaskDump as text (an indented tree) and as JSON.
//
// Text, one task per line, children indented by two spaces:
//   #3 "conn 127.0.0.1:40112" suspended 1520 ms at service.cpp:88: read fd 9 [cancelled]
#include <eddy/runtime/task_dump.hpp>

#include <cstdio>
#include <string>

namespace eddy {
namespace {

/// A name on one line: quotes, backslashes and control characters escaped as in JSON.
void text_name(std::string_view s, std::string& out) {
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
            out += buf;
        } else {
            out += c;
        }
    }
}

void text_of(const TaskDump::Task& t, int depth, std::string& out) {
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    // Appends only (no string operator+: GCC 12 warns falsely about it, -Wrestrict).
    out += '#';
    out += std::to_string(t.id);
    if (!t.name.empty()) {
        out += " \"";
        text_name(t.name, out);
        out += '"';
    }
    if (t.kind != "child") {
        out += " [";
        out += t.kind;
        out += ']';
    }
    out += ' ';
    out += t.state;
    if (t.worker) {
        out += " on worker ";
        out += std::to_string(*t.worker);
    }
    if (t.waited) {
        out += ' ';
        out += std::to_string(t.waited->count());
        out += " ms";
    }
    if (!t.site.empty()) {
        out += " at ";
        out += t.site;
    }
    if (!t.waits_on.empty()) {
        out += t.state == "runnable" ? ", woken from: " : ": ";
        out += t.waits_on;
    }
    if (t.cancelled) out += " [cancelled]";
    out += '\n';
    for (const TaskDump::Task& c : t.children) text_of(c, depth + 1, out);
}

void json_string(std::string_view s, std::string& out) {
    out += '"';
    for (const char c : s) {
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
                out += buf;
            } else {
                out += c;
            }
        }
    }
    out += '"';
}

void json_of(const TaskDump::Task& t, std::string& out) {
    out += "{\"id\":";
    out += std::to_string(t.id);
    out += ",\"name\":";
    if (t.name.empty()) {
        out += "null";
    } else {
        json_string(t.name, out);
    }
    out += ",\"kind\":";
    json_string(t.kind, out);
    out += ",\"state\":";
    json_string(t.state, out);
    out += ",\"waits_on\":";
    json_string(t.waits_on, out);
    out += ",\"site\":";
    json_string(t.site, out);
    out += ",\"waited_ms\":";
    out += t.waited ? std::to_string(t.waited->count()) : std::string("null");
    out += ",\"worker\":";
    out += t.worker ? std::to_string(*t.worker) : std::string("null");
    out += ",\"cancelled\":";
    out += t.cancelled ? "true" : "false";
    out += ",\"children\":[";
    for (std::size_t i = 0; i < t.children.size(); ++i) {
        if (i != 0) out += ',';
        json_of(t.children[i], out);
    }
    out += "]}";
}

}  // namespace

std::string TaskDump::to_text() const {
    std::string out = "eddy task dump: ";
    out += std::to_string(workers);
    out += " workers, ";
    out += std::to_string(roots.size());
    out += " root tasks, ";
    out += std::to_string(tasks);
    out += " tasks (driver ";
    out += to_string(driver);
    out += ')';
    if (!complete) {
        out += "; partial: worker";
        out += busy_workers.size() == 1 ? " " : "s ";
        for (std::size_t i = 0; i < busy_workers.size(); ++i) {
            if (i != 0) out += ", ";
            out += std::to_string(busy_workers[i]);
        }
        out += busy_workers.size() == 1 ? " is" : " are";
        out += " running one task and did not stop";
    }
    out += '\n';
    for (const Task& t : roots) text_of(t, 0, out);
    return out;
}

std::string TaskDump::to_json() const {
    std::string out = "{\"workers\":";
    out += std::to_string(workers);
    out += ",\"driver\":\"";
    out += to_string(driver);
    out += "\",\"tasks\":";
    out += std::to_string(tasks);
    out += ",\"complete\":";
    out += complete ? "true" : "false";
    out += ",\"busy_workers\":[";
    for (std::size_t i = 0; i < busy_workers.size(); ++i) {
        if (i != 0) out += ',';
        out += std::to_string(busy_workers[i]);
    }
    out += "],\"roots\":[";
    for (std::size_t i = 0; i < roots.size(); ++i) {
        if (i != 0) out += ',';
        json_of(roots[i], out);
    }
    out += "]}";
    return out;
}

}  // namespace eddy

// Unicode string helpers for the Jinja interpreter: Python's str methods count, index and
// slice code points and classify Unicode whitespace, while pith keeps strings as UTF-8 bytes.
// ASCII strings (the common case) take byte-level fast paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pith::jinja::text {

bool is_ascii(std::string_view s);
std::u32string decode(std::string_view s);  // invalid bytes decode to U+FFFD
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
size_t length(std::string_view s);  // in code points

bool is_space(char32_t c);  // Python str.isspace() for one code point
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);  // has distinct upper/lower forms

// Python str.strip/lstrip/rstrip; `chars` null means whitespace.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
// Python str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// Python str.split(sep, maxsplit); sep null splits on whitespace runs.
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);

}  // namespace pith::jinja::text

# pith_chat_template: Jinja chat templates (the model's own template, rendered as Hugging Face
# does). A library of its own, apart from the tokenizers, so it depends only on pith_common and
# nlohmann_json. Included from src/tokenizer/CMakeLists.txt (or src/CMakeLists.txt).
add_library(pith_chat_template
  ${CMAKE_CURRENT_LIST_DIR}/chat_template.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_value.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_lexer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_parser.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_interpreter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_builtins.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_filters.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_tests.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_methods.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_globals.cpp
  ${CMAKE_CURRENT_LIST_DIR}/jinja_format.cpp
)
target_include_directories(pith_chat_template PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(pith_chat_template PUBLIC pith_common nlohmann_json::nlohmann_json)

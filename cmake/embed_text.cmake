# Writes OUT, a C++ file defining `const char* FUNCTION()` that returns the text of IN, for a
# script kiln carries inside its binary (cmake -DIN=... -DOUT=... -DFUNCTION=... -P this file), in
# namespace kiln::eval, or -DNAMESPACE=... .
if(NOT NAMESPACE)
  set(NAMESPACE kiln::eval)
endif()
file(READ "${IN}" text)
string(FIND "${text}" ")kiln_text\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )kiln_text\"")
endif()
file(WRITE "${OUT}.tmp" "// Generated from ${IN} by cmake/embed_text.cmake.\n"
  "namespace ${NAMESPACE} {\nconst char* ${FUNCTION}() {\n  return R\"kiln_text(${text})kiln_text\";\n}\n}  // namespace ${NAMESPACE}\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)

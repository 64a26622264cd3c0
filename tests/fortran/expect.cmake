# Fails unless FILE contains the text EXPECT:  cmake -DFILE=<file> -DEXPECT=<text> -P expect.cmake
file(READ ${FILE} text)
string(FIND "${text}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${FILE} lacks \"${EXPECT}\"")
endif()

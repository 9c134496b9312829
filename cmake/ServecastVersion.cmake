# Stamps the build commit into `servecast --version` and every provenance file.
# The stamp is refreshed on every build (not only at configure time), and the
# generated source is rewritten only when the commit changes, so it never goes stale
# and never forces needless rebuilds.
set(SERVECAST_BUILD_INFO_CPP ${CMAKE_BINARY_DIR}/generated/build_info.cpp)
add_custom_target(servecast_build_info
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${SERVECAST_BUILD_INFO_CPP}
          -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/GenBuildInfo.cmake
  BYPRODUCTS ${SERVECAST_BUILD_INFO_CPP}
  COMMENT "Stamping the build commit"
  VERBATIM)

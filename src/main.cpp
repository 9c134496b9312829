#include "cli/cli.h"

int main(int argc, char** argv) { return servecast::cli::Main(argc, argv, nullptr); }

#pragma once

// Params lives in core (core/params.h): the table declarations below collect and
// perfdb (tables/table_spec.h) take it. Collect code names it unqualified.
#include "core/params.h"

namespace servecast::collect {

using ::servecast::Params;
// Value formatting lives in core; make it visible beside the collect overloads.
using ::servecast::ToString;

}  // namespace servecast::collect

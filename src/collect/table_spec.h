#pragma once

// The table declarations live in tables/ (below collect and perfdb, which both read
// them); collect code names them unqualified.
#include "collect/params.h"
#include "tables/table_spec.h"

namespace servecast::collect {

using ::servecast::tables::AddTableSpec;
using ::servecast::tables::AllTableSpecs;
using ::servecast::tables::DtypeBytes;
using ::servecast::tables::FindTableSpec;
using ::servecast::tables::MetricColumns;
using ::servecast::tables::OpCost;
using ::servecast::tables::PowerColumns;
using ::servecast::tables::PrefixColumns;
using ::servecast::tables::TableSpec;

}  // namespace servecast::collect

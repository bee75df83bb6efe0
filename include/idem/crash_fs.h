// Deprecated: include "idem/crash/file_system.h" (namespace idem::crash).
#include "idem/crash/file_system.h"

namespace idem {
using crash::ApplyPowerLoss;
using crash::CrashFileSystem;
using crash::CrashFsOptions;
using crash::FsOp;
using crash::PowerLossReport;
}  // namespace idem

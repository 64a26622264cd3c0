#include <sys/ddsysimpl.h>

std::vector<DDModuleHook> &DDModuleInitializers()
{
  static std::vector<DDModuleHook> v;
  return v;
}

std::vector<DDModuleHook> &DDModuleFinalizers()
{
  static std::vector<DDModuleHook> v;
  return v;
}

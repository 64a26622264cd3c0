/* Internal (C++) plumbing of the package: module registration. */
#pragma once
#include <vector>
#include <petscsys.h>

using DDModuleHook = PetscErrorCode (*)(void);
std::vector<DDModuleHook> &DDModuleInitializers();
std::vector<DDModuleHook> &DDModuleFinalizers();

/* Registers a module's package initializer (class ids, events, types) at load time. */
struct DDModuleRegistrar {
  DDModuleRegistrar(DDModuleHook init, DDModuleHook fin = nullptr)
  {
    DDModuleInitializers().push_back(init);
    if (fin) DDModuleFinalizers().push_back(fin);
  }
};

/*
  The settings of a primitive type that must agree on every rank of the primitive's communicator.

  A type's create composes a function under DDPRIMITIVE_SETTINGS_C that appends its settings to a
  text, one per line, each line starting with the type's name ("halo dimension 3: kernel 3, ...");
  DDPrimitiveSetUp() compares the text across the ranks (DDCheckSameString()) before it sets up,
  so that a setting given differently on some rank is an error on every rank naming it. Rank-local
  inputs (a halo's window, a scatter's index map) are left out. DDPrimitiveSetType() removes the
  function of the previous type.
*/
#pragma once
#include <ddnn/private/ddprimitiveimpl.h>
#include <string>

#define DDPRIMITIVE_SETTINGS_C "DDPrimitiveGetSettings_C"

typedef PetscErrorCode (*DDPrimitiveSettingsFn)(DDPrimitive, std::string *);

/*
  ddnn.h - umbrella header of ddnn: domain-decomposed neural networks on PETSc and MPI.
*/
#pragma once
#include <ddsys.h>
#include <ddpartition.h>
#include <ddtensor.h>
#include <ddprimitive.h>
#include <ddlayer.h>
#include <ddnet.h>
#include <ddmodel.h>
#include <ddoptimizer.h>
#include <dddataset.h>

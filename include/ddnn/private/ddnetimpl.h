/* ddnn/private/ddnetimpl.h - the DDNet class struct (C++), for implementers working on networks. */
#pragma once
#include <ddnn/private/ddlayerimpl.h>
#include <ddnet.h>
#include <string>
#include <vector>

namespace ddnn
{
/* one layer of the graph */
struct NetNode {
  std::string      name;
  DDLayer          layer = NULL;
  std::vector<int> inputs;   /* >= 0: node index; < 0: net input -1-k */
  DDTensor         dy = NULL; /* gradient of the node's output */
  int              consumers = 0;
  std::string      weightsname;            /* the module name in weights files (DDNetSetLayerWeightsName()) */
  bool             weightsnameset = false; /* else the layer's name */
};

/* the graph, evaluated in insertion order */
struct NetImpl {
  std::vector<std::string> innames;
  std::vector<NetNode>     nodes;
  int                      output = -1;
  std::string              outname;
  std::vector<DDTensor>    inputs;  /* references to the tensors of the last set-up/forward */
  std::vector<DDTensor>    ingrads; /* gradients of the net inputs (made on request) */
  std::vector<bool>        wantgrad;
  std::vector<DDTensor>    params, grads;
  std::vector<std::string> pnames;
  std::vector<DDTensor>    scratch; /* per node: a buffer for one consumer's contribution */
  bool                     forwarddone = false;
  bool                     checkfinite = false; /* -dd_check_finite: every layer's output and gradients */
  PetscInt64               step        = 0;     /* DDNetForward() calls since set-up, for messages */
};
} // namespace ddnn

struct _DDNetOps {
  int dummy; /* a network has no types (yet): its behaviour is the graph of its layers */
};

struct _p_DDNet {
  PETSCHEADER(struct _DDNetOps);
  ddnn::NetImpl *impl;
  PetscBool      setupcalled;
};

!
!  ddnn/finclude/ddnn.h - declarations of ddnn's objects for Fortran, as PETSc's finclude headers
!  declare its own (#define Vec type(tVec)): after
!
!      #include "ddnn/finclude/ddnn.h"
!      use ddnn
!
!  a program may write DDTensor :: x instead of type(tDDTensor) :: x. The module ddnn itself
!  needs no header: this one only adds these spellings.
!
#if !defined(DDNN_FINCLUDE_DDNN_H)
#define DDNN_FINCLUDE_DDNN_H

#define DDPartition type(tDDPartition)
#define DDTensor type(tDDTensor)
#define DDPrimitive type(tDDPrimitive)
#define DDLayer type(tDDLayer)
#define DDNet type(tDDNet)
#define DDOptimizer type(tDDOptimizer)
#define DDDataset type(tDDDataset)

#endif

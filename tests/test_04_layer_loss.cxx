/*
  DDLAYERLOSS: PyTorch parity of cross-entropy (class weights, ignore_index, label smoothing,
  probability targets, reductions mean / sum / none; values from torch 1.13's
  F.cross_entropy on fixed data, float64) on every partition that keeps the classes on one
  worker, float64 and float32; P ranks = 1 rank and finite differences on random data;
  mse and l1 with reduction none; settings outside the envelope are errors.
*/
#include "layertest.hpp"

using namespace ddtest;

namespace
{
/* N, C, H, W of the torch cases; x = 2 sin(0.37 i), soft targets |cos(0.71 i)| normalized over C, dy = 0.1 i - 0.3 */
const PetscInt N = 2, C = 4, H = 3, Wd = 2;
const std::vector<double> kTarget = {0, 1, 2, 3, -100, 1, 3, 3, 0, -100, 2, 1};
const std::vector<PetscReal> kWeights = {0.5, 1.0, 2.0, 1.5};

struct TorchCase {
  const char         *name;
  bool                weighted;
  DDReduction         red;
  PetscBool           prob;
  double              eps;
  std::vector<double> y, dx, dt;
};

const std::vector<TorchCase> kCases = {
  {"plain_ignore", false, DD_REDUCTION_MEAN, PETSC_FALSE, 0.0, {2.0284441041966486}, {-0.08773340539288707, 0.023052838226969567, 0.033527864982677326, 0.041987485026899536, 0.0, 0.05287824167409532, 0.06034092880934238, -0.06809870148384027, 0.012490815273978953, 0.004813309531879292, 0.0, -0.0984409011822001, 0.0017871422235994684, 0.0015281813677702157, -0.09853989886845925, 0.0018358259925682315, 0.0, 0.007838682861927874, 0.025605334359945244, 0.043517681889100476, 0.05252121861180298, -0.04863662055134707, 0.0, 0.03772397664617691, 0.03403681458469601, 0.01700989099748101, -0.09213615195331212, 0.0, 0.0032203822561924647, 0.0028009842040443225, 0.0016518256528003095, 0.00202770698381988, 0.0030707546185332908, 0.0, 0.016547248123929877, -0.05921021346004521, 0.047444755903926675, 0.07292033673114032, 0.08513966281484431, 0.0, -0.022096878794936894, 0.053765431597878034, -0.083133396141423, -0.09195793471244121, 0.003925734519934522, 0.0, 0.002329248414814543, 0.0026437976581228425}, {}},
  {"weighted_mean", true, DD_REDUCTION_MEAN, PETSC_FALSE, 0.0, {1.9938799347253693}, {-0.03509336215715483, 0.018442270581575652, 0.05364458397228372, 0.05038498203227944, 0.0, 0.04230259333927625, 0.02413637152373695, -0.05447896118707221, 0.019985304438366325, 0.0057759714382551505, 0.0, -0.07875272094576008, 0.0007148568894397874, 0.0012225450942161726, -0.1576638381895348, 0.0022029911910818774, 0.0, 0.0062709462895422985, 0.010242133743978097, 0.03481414551128038, 0.08403394977888477, -0.05836394466161648, 0.0, 0.030179181316941524, 0.040844177501635215, 0.020411869196977208, -0.036854460781324844, 0.0, 0.005152611609907943, 0.002240787363235458, 0.0019821907833603714, 0.0024332483805838555, 0.0012283018474133162, 0.0, 0.026475596998287804, -0.047368170768036164, 0.056933707084712, 0.08750440407736837, 0.034055865125937716, 0.0, -0.03535500607189903, 0.04301234527830243, -0.09976007536970757, -0.11034952165492944, 0.001570293807973809, 0.0, 0.0037267974637032685, 0.0021150381264982737}, {}},
  {"weighted_smooth_mean", true, DD_REDUCTION_MEAN, PETSC_FALSE, 0.2, {2.017657989854655}, {-0.027621370804301278, 0.01736438411065444, 0.04762124017436245, 0.046705482631203464, 0.0, 0.042417723006240075, 0.027377282980858036, -0.04120290924642582, 0.014486406605488852, 0.0015834390569799794, 0.0, -0.06669035699304808, -0.007070686043728277, -0.006716327651073019, -0.1338390503253197, -0.005870441848620851, 0.0, -0.0014155063959805853, 0.0073147738671715265, 0.030554852786844406, 0.07173140354546842, -0.0424184798395626, 0.0, 0.025688140382788608, 0.03748270491824738, 0.01773147355707797, -0.0299107990157223, 0.0, 0.0027661657391648484, 0.0003528267313972314, -0.002083882242751641, -0.0016478598987689395, -0.002403207598362689, 0.0, 0.02048992722341622, -0.03373657930643797, 0.04703591684855494, 0.07658759060812277, 0.03627262466371904, 0.0, -0.020703380616506593, 0.037162962542217556, -0.08243473952405067, -0.0926712042664318, -0.003958618049634048, 0.0, -0.0025527123460744763, -0.003779209967176812}, {}},
  {"smooth_sum", false, DD_REDUCTION_SUM, PETSC_FALSE, 0.1, {20.359698791873654}, {-0.8023340539288707, 0.20552838226969566, 0.3102786498267732, 0.3948748502689953, 0.0, 0.5037824167409531, 0.5784092880934237, -0.6059870148384027, 0.09990815273978954, 0.023133095318792922, 0.0, -0.909409011822001, -0.007128577764005318, -0.009718186322297845, -0.9103989886845925, -0.0066417400743176876, 0.0, 0.05338682861927873, 0.23105334359945243, 0.4101768188910047, 0.5002121861180298, -0.4113662055134707, 0.0, 0.352239766461769, 0.3153681458469601, 0.1450989099748101, -0.8463615195331212, 0.0, 0.007203822561924644, 0.003009842040443224, -0.008481743471996907, -0.0047229301618012046, 0.005707546185332903, 0.0, 0.14047248123929879, -0.5171021346004521, 0.4494475590392667, 0.7042033673114031, 0.826396628148443, 0.0, -0.14596878794936896, 0.5126543159787803, -0.7563339614142299, -0.8445793471244121, 0.014257345199345219, 0.0, -0.0017075158518545727, 0.00143797658122842}, {}},
  {"weighted_smooth_none", true, DD_REDUCTION_NONE, PETSC_FALSE, 0.3, {1.6079239587988614, 1.6612465801424348, 6.820767649109946, 1.6342371926175838, 0.0, 3.7403056637065015, 2.5290598350415485, 3.3362297583417506, 1.6349784457591063, 0.0, 1.073758127260405, 1.3308305069630735}, {0.08957015672952937, -0.042063602187984564, -0.05576196034425223, 3.1131856072692435e-17, 0.0, 0.10618821959930491, -0.10874152016031965, 0.08641220819025655, -0.014671197111312635, -3.558453071494988e-19, 0.0, -0.15164793754173017, 0.041112965663671154, 0.026714410059294032, 0.1524083204915151, -6.8744720808035345e-18, 0.0, -0.013146831846855073, -0.021941602232880893, -0.07106301606156601, -0.08197516303595026, -2.3901538684739412e-17, 0.0, 0.058606549789280336, 0.1342573823495755, 0.08195637868564176, -0.1652435508307564, 0.0, 0.013763249533191378, -0.005911535845218829, -0.015438445334278681, -0.01844207019222669, -0.026368514507816822, 0.0, 0.15309955793982877, -0.2692078357563887, 0.15782633148928657, 0.3556459193674998, 0.23363127770381054, 0.0, -0.11705371902709072, 0.342382711741751, -0.2766452685045833, -0.4191602278609149, -0.042019212365237354, 0.0, -0.0498090884459293, -0.06726334014014355}, {}},
  {"prob_weighted_smooth_mean", true, DD_REDUCTION_MEAN, PETSC_TRUE, 0.25, {2.706458292084143}, {-0.0005155806886277652, 0.013693859230953146, 0.03370270535688161, 0.03242936615324581, 0.03459531659819672, 0.04370433775423244, 0.04675197529139437, 0.023841780119315516, -0.017759178890650512, -0.02470897986422839, -0.017277207749905186, -0.0045597995540573675, -0.034081313897358655, -0.05595090854101239, -0.06577505783312386, -0.02513074919678064, -0.02214403393332593, -0.0433686735466819, -0.01215508070540792, 0.018415269190743704, 0.04983153136689279, 0.01741036290776322, 0.004825925085034386, 0.004224135346506823, 0.032538085971481175, 0.008956932158402358, -0.005004747514916463, -0.00863483175784253, -0.005765725360710361, -0.0019285659819358852, -0.028112778836532543, -0.02808645514865635, -0.018210700147860345, -0.001407665965539203, -0.0010419646983287865, 0.012365903536111464, -0.014699928665675842, 0.04246020681856805, 0.05881688628752815, 0.04423313452641293, 0.02468340366389961, 0.010574651908069516, 0.010274621530727217, -0.023330683828314047, -0.03560143862475134, -0.0341906368030312, -0.01787571360486047, -0.021011989462245105}, {0.06557157824745974, 0.04585566533233289, 0.03414979069923181, 0.027118705864320913, 0.022339885811121417, 0.019911820070118807, 0.031572472465408646, 0.0714077169493765, 0.13001103686520266, 0.18961158038151066, 0.2353943948030095, 0.2600663882841273, 0.5030690456331681, 0.5226364757628627, 0.5283330605610221, 0.499709459196361, 0.42714314437590634, 0.31826242100560764, 0.1277221390100571, 0.07800026721327626, 0.060370587563292596, 0.06246044339410908, 0.07386453442925972, 0.09139446641037609, 0.03367898328920677, 0.05535547461700746, 0.07946544143684246, 0.09776528551030622, 0.10736469126169897, 0.11172497903514662, 0.2564555658440343, 0.24364153724962984, 0.21770292815695966, 0.1721895529545837, 0.11243439840563714, 0.056046154113675264, 0.0932005231746835, 0.039475327296540526, 0.02010964824464552, 0.017802830492931784, 0.031213020887100103, 0.07756743258626095, 0.16685949582839027, 0.2362953993020917, 0.30352656688361124, 0.3445122934335294, 0.3524648005496339, 0.3405894183398426}},
  {"prob_none", false, DD_REDUCTION_NONE, PETSC_TRUE, 0.0, {2.023951613678791, 2.313132159230004, 2.9346877261116573, 2.067435892458881, 1.759243295239294, 1.4315033218273532, 2.1314638981222864, 2.5648874595643765, 2.793963072958915, 2.3828446123033764, 1.771241502105244, 1.4902756525199743}, {0.0621368610566511, 0.012293815483775644, -0.025649182536188652, 1.181180887713225e-17, 0.017010886015514773, 0.03658940350141032, -0.1377760512407479, -0.04418332918131904, 0.030699956440443595, -1.887409868828203e-17, -0.020565828771632502, -0.00019543417449892543, 0.05576758673424002, 0.07249489905179603, 0.04417728779162972, -6.321182446315432e-18, -0.008631764175298927, -0.05059283486092397, 0.019871603449856702, -0.0406053853542526, -0.04922806169588468, 1.3383472257465203e-17, 0.012186706931416652, 0.014198865534012582, 0.06558091676766978, -0.0044116261826909605, -0.11862275062864337, -0.1789041561190537, -0.12915210843565614, -0.0397274132300578, -0.11405853191074963, -0.1514478029230144, -0.1120033274263802, 0.00972313979489651, -0.045287646822886496, -0.02709243911904962, 0.0017590187082470983, 0.22464145441323977, 0.3790958336060722, 0.3400423046704558, 0.2527723974274341, 0.1832961639745133, 0.046718596434832775, -0.06878202530753438, -0.1484697555510487, -0.17086128834629868, -0.0783326421688915, -0.11647631162540588}, {-0.6294871511756135, -0.29347625812693046, -0.10927933023754177, 4.817249863777014e-17, 0.07148763459558856, 0.12743564844876037, -0.15154786783396149, -0.2285046942380048, -0.2080176589843242, 1.6840891382009343e-16, 0.3766310316848153, 0.8322124425092075, -1.2073657095196035, -0.8362183612205801, -0.4226664484488176, 2.219155788891141e-16, 0.34171451550072524, 0.5092198736089723, -0.40871084483218273, -0.16640057005498932, -0.06439529340084542, 3.698401193836595e-17, 0.07878883672454373, 0.19497486167546899, 0.3233182395763851, 0.7085500750976957, 1.2714470629894794, 1.87709348179788, 2.404969084262057, 2.860159463299754, 1.230986716051365, 1.5593058383976315, 1.7416234252556773, 1.6530197083640041, 1.259265262143136, 0.7173907726550435, 0.22368125561924046, 0.1263210473489297, 0.0804385929785821, 0.08545358636607257, 0.17479291696776056, 0.4964315685520701, 0.533950386650849, 1.0081937036889248, 1.6188083567125933, 2.204878677974589, 2.6317371774372664, 2.9063630364999904}},
};

std::vector<double> Logits()
{
  std::vector<double> x(N * C * H * Wd);
  for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.37 * (double)i) * 2;
  return x;
}

std::vector<double> SoftTargets()
{
  std::vector<double> t(N * C * H * Wd);
  for (size_t i = 0; i < t.size(); i++) t[i] = std::fabs(std::cos(0.71 * (double)i));
  for (PetscInt n = 0; n < N; n++)
    for (PetscInt s = 0; s < H * Wd; s++) {
      double sum = 0;
      for (PetscInt c = 0; c < C; c++) sum += t[(n * C + c) * H * Wd + s];
      for (PetscInt c = 0; c < C; c++) t[(n * C + c) * H * Wd + s] /= sum;
    }
  return t;
}

std::function<void(DDLayer)> ConfigureCE(bool weighted, DDReduction red, PetscBool prob, double eps)
{
  return [=](DDLayer l) {
    DDT(DDLayerSetType(l, DDLAYERLOSS));
    DDT(DDLayerLossSetType(l, DD_LOSS_CROSSENTROPY));
    DDT(DDLayerLossSetReduction(l, red));
    if (weighted) DDT(DDLayerLossSetClassWeights(l, C, kWeights.data()));
    DDT(DDLayerLossSetLabelSmoothing(l, eps));
    DDT(DDLayerLossSetProbabilityTargets(l, prob));
  };
}

void ExpectClose(const std::vector<double> &got, const std::vector<double> &ref, double tol, const std::string &what)
{
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); i++) EXPECT_NEAR(got[i], ref[i], tol * (1 + std::fabs(ref[i]))) << what << " entry " << i;
}
} // namespace

TEST(LossTorch, CrossEntropyOnEveryPartition)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 3, fs);
  for (auto &ps : fs) {
    if (ps[0] > N || ps[1] > H || ps[2] > Wd) continue;
    for (const TorchCase &tc : kCases)
      for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
        InputSpec xs, ts;
        xs.shape  = {N, C, H, Wd};
        xs.pshape = {ps[0], 1, ps[1], ps[2]};
        ts        = xs;
        if (!tc.prob) {
          ts.shape  = {N, H, Wd};
          ts.pshape = {ps[0], ps[1], ps[2]};
        }
        DDTensor x = MakeInput(xs, dt, 1), t = MakeInput(ts, dt, 2), y, dy = NULL, dx, dtt;
        SetValues(x, Logits());
        SetValues(t, tc.prob ? SoftTargets() : kTarget);
        DDLayer l;
        DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
        ConfigureCE(tc.weighted, tc.red, tc.prob, tc.eps)(l);
        DDTensor in[2] = {x, t}, din[2];
        DDT(DDLayerSetUpMulti(l, 2, in));
        DDT(DDLayerGetOutput(l, &y));
        DDT(DDLayerForwardMulti(l, 2, in, y));
        const double tol  = dt == DD_FLOAT64 ? 1e-13 : 2e-5;
        std::string  what = std::string(tc.name) + ", partition " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + "x" + std::to_string(ps[2]) + (dt == DD_FLOAT64 ? " float64" : " float32");
        if (tc.red == DD_REDUCTION_NONE) {
          ExpectClose(GatherAll(y), tc.y, tol, what + " loss per position");
          DDT(DDLayerCreateOutput(l, &dy));
          PetscInt M;
          DDT(DDTensorGetSize(dy, &M));
          std::vector<double> g(M);
          for (PetscInt i = 0; i < M; i++) g[i] = 0.1 * i - 0.3;
          SetValues(dy, g);
        } else {
          PetscReal v;
          DDT(DDLayerLossGetValue(l, &v));
          EXPECT_NEAR(v, tc.y[0], tol * (1 + std::fabs(tc.y[0]))) << what << " loss";
        }
        DDT(DDTensorDuplicate(x, &dx));
        DDT(DDTensorDuplicate(t, &dtt));
        DDT(DDTensorSet(dx, 777.0));
        din[0] = dx;
        din[1] = dtt;
        DDT(DDLayerBackwardMulti(l, dy, 2, din));
        ExpectClose(GatherAll(dx), tc.dx, tol, what + " d logits");
        if (tc.prob) ExpectClose(GatherAll(dtt), tc.dt, tol, what + " d target");
        for (DDTensor *p : {&x, &t, &dy, &dx, &dtt}) DDT(DDTensorDestroy(p));
        DDT(DDLayerDestroy(&l));
      }
  }
}

/* random logits and targets (some ignored) on P ranks against 1 rank, and finite differences */
TEST(LossTorch, CrossEntropyDistributedEqualsSerialAndFiniteDifferences)
{
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 2, fs);
  struct Cfg {
    bool        weighted;
    DDReduction red;
    PetscBool   prob;
    double      eps;
  } cfgs[] = {{true, DD_REDUCTION_MEAN, PETSC_FALSE, 0.1}, {false, DD_REDUCTION_SUM, PETSC_FALSE, 0}, {true, DD_REDUCTION_NONE, PETSC_FALSE, 0.2}, {true, DD_REDUCTION_MEAN, PETSC_TRUE, 0.3}, {false, DD_REDUCTION_NONE, PETSC_TRUE, 0}};
  for (auto &c : cfgs)
    for (auto &ps : fs) {
      InputSpec xs, ts;
      xs.shape  = {2 * ps[0] + 1, C, 3 * ps[1] + 2};
      xs.pshape = {ps[0], 1, ps[1]};
      xs.lo = -3, xs.hi = 3;
      ts = xs;
      if (c.prob) ts.lo = 0, ts.hi = 1;
      else {
        ts.shape  = {xs.shape[0], xs.shape[2]};
        ts.pshape = {ps[0], ps[1]};
        ts.lo = -1, ts.hi = C; /* floor: -1 is the ignore_index below */
        ts.integer = true;
      }
      auto conf = [&](DDLayer l) {
        ConfigureCE(c.weighted, c.red, c.prob, c.eps)(l);
        DDT(DDLayerLossSetIgnoreIndex(l, -1));
      };
      std::string what = std::string("reduction ") + DDReductions[c.red] + (c.prob ? ", probabilities" : ", class indices") + (c.weighted ? ", weighted" : "");
      for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
        RunResult par = RunLayer(conf, {xs, ts}, dt, 9, true), ser = RunLayer(conf, {Serial(xs), Serial(ts)}, dt, 9, true);
        ExpectSameRun(par, ser, dt == DD_FLOAT64 ? 1e-13 : 1e-5, what);
      }
      SCOPED_TRACE(what);
      ExpectFiniteDifferences(conf, {xs, ts}, 4, 1e-7, 1e-6);
    }
}

TEST(LossTorch, MseAndL1ReductionNone)
{
  InputSpec s;
  s.shape  = {3, 2, 4 * Size() + 1};
  s.pshape = {1, 1, Size()};
  for (DDLossType type : {DD_LOSS_MSE, DD_LOSS_L1}) {
    auto conf = [type](DDLayer l) {
      DDT(DDLayerSetType(l, DDLAYERLOSS));
      DDT(DDLayerLossSetType(l, type));
      DDT(DDLayerLossSetReduction(l, DD_REDUCTION_NONE));
    };
    RunResult par = RunLayer(conf, {s, s}, DD_FLOAT64, 3), ser = RunLayer(conf, {Serial(s), Serial(s)}, DD_FLOAT64, 3);
    ExpectSameRun(par, ser, 1e-15, DDLossTypes[type]);
    /* elementwise, as torch's reduction='none': (x - t)^2 or |x - t| */
    std::vector<double> x = GatherAll(MakeInput(s, DD_FLOAT64, 4)), t = GatherAll(MakeInput(s, DD_FLOAT64, 104));
    ASSERT_EQ(par.y.size(), x.size());
    double sum = 0;
    for (size_t i = 0; i < x.size(); i++) {
      const double r = x[i] - t[i], e = type == DD_LOSS_MSE ? r * r : std::fabs(r);
      EXPECT_NEAR(par.y[i], e, 1e-15);
      EXPECT_NEAR(par.dx[0][i], type == DD_LOSS_MSE ? 2 * r : (r > 0 ? 1 : -1), 1e-15);
      sum += e;
    }
    EXPECT_NEAR(par.loss, sum, 1e-12) << "the value of reduction none is the sum of the output";
    ExpectFiniteDifferences(conf, {s, s}, 4, 1e-7, 1e-6);
  }
}

TEST(LossTorchBadInput, SettingsOutsideTheEnvelope)
{
  DDLayer         l;
  const PetscReal neg[] = {1, -1}, three[] = {1, 1, 1};
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  DDT(DDLayerSetType(l, DDLAYERLOSS));
  DD_EXPECT_ERROR(DDLayerLossSetClassWeights(l, 2, neg), PETSC_ERR_ARG_OUTOFRANGE, "-layer_loss_weight");
  DD_EXPECT_ERROR(DDLayerLossSetLabelSmoothing(l, 1.5), PETSC_ERR_ARG_OUTOFRANGE, "-layer_loss_label_smoothing");
  DD_EXPECT_ERROR(DDLayerLossSetReduction(l, (DDReduction)7), PETSC_ERR_ARG_OUTOFRANGE, "-layer_loss_reduction");
  /* weights with mse */
  InputSpec s;
  s.shape = {2, C, 3};
  DDTensor x = MakeInput(s, DD_FLOAT64, 1), t3 = MakeInput(s, DD_FLOAT64, 2);
  DDTensor in[2] = {x, t3};
  DDT(DDLayerLossSetClassWeights(l, 3, three));
  DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 2, in), PETSC_ERR_ARG_INCOMP, "-layer_loss_weight");
  /* cross-entropy: C weights for C classes */
  DDT(DDLayerLossSetType(l, DD_LOSS_CROSSENTROPY));
  DDT(DDLayerLossSetProbabilityTargets(l, PETSC_TRUE));
  DD_EXPECT_ERROR(DDLayerSetUpMulti(l, 2, in), PETSC_ERR_ARG_INCOMP, "3 class weights for 4 classes");
  DDT(DDLayerDestroy(&l));
  /* a target that is neither a class nor the ignore_index: an error on every rank */
  InputSpec ts;
  ts.shape = {2, 3};
  DDTensor t = MakeInput(ts, DD_FLOAT64, 3), y;
  std::vector<double> tv = {0, 1, 2, 3, 7, -100};
  DDT(DDTensorSetValuesGlobal(t, tv.data()));
  in[1] = t;
  DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
  ConfigureCE(false, DD_REDUCTION_MEAN, PETSC_FALSE, 0)(l);
  DDT(DDLayerSetUpMulti(l, 2, in));
  DDT(DDLayerGetOutput(l, &y));
  DD_EXPECT_ERROR(DDLayerForwardMulti(l, 2, in, y), PETSC_ERR_ARG_OUTOFRANGE, "holds 7., which is neither a class index in [0, 4) nor the ignore_index -100");
  DDT(DDLayerDestroy(&l));
  for (DDTensor *p : {&x, &t3, &t}) DDT(DDTensorDestroy(p));
}

/*
  Non-finite logits as PyTorch's cross_entropy takes them (torch 1.13, float64, the values below): a
  class masked with a -inf logit (common practice) gives a finite loss and a zero gradient for it
  (the loss was nan: 0 * inf in the label smoothing term, which is not there without smoothing); a
  -inf logit at the target gives a loss of +inf; a nan logit at an ignored position leaves the loss
  alone and gives nan in its gradient (PyTorch's 0 - softmax * 0). Every partition, both types.
*/
TEST(LossTorch, CrossEntropyNonFiniteLogitsAsPyTorch)
{
  const std::vector<double> ymean = { 2.02336742229798 }, dxmean = { -0.08751019481070384, 0.023052838226969567, 0.033527864982677326, 0.041987485026899536, NAN, 0.05287824167409532, 0.06143892986671815, -0.06809870148384027, 0.012490815273978953, 0.004813309531879292, NAN, -0.0984409011822001, 0.0, 0.0015281813677702144, -0.09853989886845925, 0.0018358259925682315, NAN, 0.007838682861927874, 0.026071264943985695, 0.043517681889100476, 0.05252121861180298, -0.04863662055134707, NAN, 0.03772397664617691, 0.03403681458469601, 0.01700989099748101, -0.09213615195331212, 0.0, 0.0, 0.0028009842040443225, 0.0016518256528003095, 0.00202770698381988, 0.0030707546185332908, 0.0, 0.017097864725745582, -0.05921021346004521, 0.047444755903926675, 0.07292033673114032, 0.08513966281484431, 0.0, -0.01950461985571568, 0.053765431597878034, -0.083133396141423, -0.09195793471244121, 0.003925734519934522, 0.0, 0.0024067551299701015, 0.0026437976581228425 };
  const std::vector<double> ynone = { 2.080257459306419, 1.142523471190024, 4.226664484488177, 0.6662447295371635, 0.0, 4.161062212546037, 1.7798346221694963, 2.5204842592223113, 2.542894125978959, 0.0, 0.21697039272241073, INFINITY }, dxnone = { 0.2625305844321115, -0.04610567645393913, -0.03352786498267732, 2.3307736311483937e-17, NAN, 0.10575648334819064, -0.18431678960015443, 0.13619740296768051, -0.01249081527397895, 2.671923533470062e-18, NAN, -0.1968818023644002, 0.0, -0.0030563627355404284, 0.09853989886845922, 1.019088143077291e-18, NAN, 0.01567736572385575, -0.07821379483195708, -0.08703536377820094, -0.052521218611802964, -2.6998747988031294e-17, NAN, 0.07544795329235382, 0.10211044375408806, 0.06803956398992404, -0.4606807597665606, 0.0, 0.0, 0.03784460876412027, 0.00495547695840093, 0.00811082793527952, 0.015353773092666452, 0.0, 0.11968505308021907, -0.8, 0.14233426771178007, 0.2916813469245613, 0.4256983140742215, 0.0, -0.13653233899000972, 0.7264345585804546, -0.24940018842426903, -0.36783173884976483, 0.01962867259967261, 0.0, 0.016847285909790708, 0.03572083265542511 };
  auto pos = [](PetscInt n, PetscInt c, PetscInt s) { return (size_t)((n * C + c) * H * Wd + s); };
  auto same = [](double a, double b, double tol) { return std::isnan(b) ? std::isnan(a) : std::isinf(b) ? a == b : std::fabs(a - b) <= tol * (1 + std::fabs(b)); };
  int                                W = Size();
  std::vector<std::vector<PetscInt>> fs;
  Factorizations(W, 3, fs);
  for (auto &ps : fs) {
    if (ps[0] > N || ps[1] > H || ps[2] > Wd) continue;
    for (DDReduction red : {DD_REDUCTION_MEAN, DD_REDUCTION_NONE})
      for (DDDataType dt : {DD_FLOAT64, DD_FLOAT32}) {
        std::vector<double> xv = Logits();
        xv[pos(0, 2, 0)] = -INFINITY; /* non-target classes masked */
        xv[pos(1, 0, 4)] = -INFINITY;
        xv[pos(0, 1, 4)] = NAN; /* at an ignored position */
        if (red == DD_REDUCTION_NONE) xv[pos(1, 1, 5)] = -INFINITY; /* at the target */
        InputSpec xs, ts;
        xs.shape  = {N, C, H, Wd};
        xs.pshape = {ps[0], 1, ps[1], ps[2]};
        ts.shape  = {N, H, Wd};
        ts.pshape = {ps[0], ps[1], ps[2]};
        DDTensor x = MakeInput(xs, dt, 1), t = MakeInput(ts, dt, 2), y, dy = NULL, dx;
        SetValues(x, xv);
        SetValues(t, kTarget);
        DDLayer l;
        DDT(DDLayerCreate(PETSC_COMM_WORLD, &l));
        ConfigureCE(false, red, PETSC_FALSE, 0.0)(l);
        DDTensor in[2] = {x, t}, din[2] = {NULL, NULL};
        DDT(DDLayerSetUpMulti(l, 2, in));
        DDT(DDLayerGetOutput(l, &y));
        DDT(DDLayerForwardMulti(l, 2, in, y));
        const double      tol  = dt == DD_FLOAT64 ? 1e-13 : 2e-5;
        const std::string what = std::string(red == DD_REDUCTION_MEAN ? "mean" : "none") + ", partition " + std::to_string(ps[0]) + "x" + std::to_string(ps[1]) + "x" + std::to_string(ps[2]) + (dt == DD_FLOAT64 ? " float64" : " float32");
        std::vector<double> yv;
        if (red == DD_REDUCTION_NONE) {
          yv = GatherAll(y);
          DDT(DDLayerCreateOutput(l, &dy));
          std::vector<double> g(N * H * Wd);
          for (size_t i = 0; i < g.size(); i++) g[i] = 0.1 * (double)i - 0.3;
          SetValues(dy, g);
        } else {
          PetscReal v;
          DDT(DDLayerLossGetValue(l, &v));
          yv = {(double)v};
        }
        const std::vector<double> &wy = red == DD_REDUCTION_MEAN ? ymean : ynone, &wdx = red == DD_REDUCTION_MEAN ? dxmean : dxnone;
        ASSERT_EQ(yv.size(), wy.size()) << what;
        for (size_t i = 0; i < wy.size(); i++) EXPECT_TRUE(same(yv[i], wy[i], tol)) << what << ": loss " << i << " is " << yv[i] << ", PyTorch " << wy[i];
        DDT(DDTensorDuplicate(x, &dx));
        DDT(DDTensorSet(dx, 777.0));
        din[0] = dx;
        DDT(DDLayerBackwardMulti(l, dy, 2, din));
        const std::vector<double> dxv = GatherAll(dx);
        for (size_t i = 0; i < wdx.size(); i++) EXPECT_TRUE(same(dxv[i], wdx[i], tol)) << what << ": d logit " << i << " is " << dxv[i] << ", PyTorch " << wdx[i];
        for (DDTensor *p : {&x, &t, &dy, &dx}) DDT(DDTensorDestroy(p));
        DDT(DDLayerDestroy(&l));
      }
  }
}

// A C interface to one Stan model, for adaptmc's ctypes binding (adaptmc.targets.stan).
//
// Compiled once per toolchain and linked with a model's stanc output, which defines
// `new_model`. Every function is callable from any thread: the reverse-mode tape is
// thread-local (STAN_THREADS) and each thread makes its own on first use, in every entry
// point, since code on doubles may differentiate inside too (an ODE solver's Jacobian). Functions that
// can fail return a nonzero status and set `*err` to a message the caller frees with
// `adaptmc_free_string`.

#include <stan/io/empty_var_context.hpp>
#include <stan/io/json/json_data.hpp>
#include <stan/math/rev.hpp>
#include <stan/model/model_base.hpp>
#include <stan/services/util/create_rng.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

stan::model::model_base& new_model(stan::io::var_context& data_context, unsigned int seed,
                                   std::ostream* msg_stream);

namespace {

struct Model {
  std::unique_ptr<stan::model::model_base> base;
  std::string names[4];  // constrained flat names by (tp, gq) = index tp + 2 gq
  std::string shapes;    // "name:d1,d2;..." of every variable, parameters first
  std::string unconstrained;  // unconstrained flat names
};

char* copy_string(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

void set_error(char** err, const std::string& text) {
  if (err != nullptr && *err == nullptr) *err = copy_string(text);
}

std::string join(const std::vector<std::string>& items, char sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string describe_shapes(const stan::model::model_base& model) {
  std::vector<std::string> names;
  std::vector<std::vector<size_t>> dims;
  model.get_param_names(names, true, true);
  model.get_dims(dims, true, true);
  std::vector<std::string> parts;
  for (size_t i = 0; i < names.size() && i < dims.size(); ++i) {
    std::vector<std::string> sizes;
    for (size_t d : dims[i]) sizes.push_back(std::to_string(d));
    parts.push_back(names[i] + ":" + join(sizes, ','));
  }
  return join(parts, ';');
}

stan::math::ChainableStack& thread_tape() {
  static thread_local stan::math::ChainableStack tape;
  return tape;
}

}  // namespace

extern "C" {

void adaptmc_free_string(char* text) { std::free(text); }

// A model from its data as JSON text ("" or "{}" for none); NULL and *err on failure.
void* adaptmc_model_new(const char* data_json, unsigned int seed, char** err) {
  thread_tape();  // transformed data may differentiate inside (an ODE or algebraic solver)
  try {
    std::string text(data_json == nullptr ? "" : data_json);
    std::unique_ptr<stan::io::var_context> context;
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      context.reset(new stan::io::empty_var_context());
    } else {
      std::istringstream stream(text);
      context.reset(new stan::json::json_data(stream));
    }
    std::ostringstream msgs;
    auto* model = new Model();
    model->base.reset(&new_model(*context, seed, &msgs));
    for (int tp = 0; tp < 2; ++tp) {
      for (int gq = 0; gq < 2; ++gq) {
        std::vector<std::string> names;
        model->base->constrained_param_names(names, tp, gq);
        model->names[tp + 2 * gq] = join(names, '\n');
      }
    }
    model->shapes = describe_shapes(*model->base);
    std::vector<std::string> names;
    model->base->unconstrained_param_names(names, false, false);
    model->unconstrained = join(names, '\n');
    return model;
  } catch (const std::exception& e) {
    set_error(err, e.what());
  } catch (...) {
    set_error(err, "unknown error while reading the data");
  }
  return nullptr;
}

void adaptmc_model_free(void* model) { delete static_cast<Model*>(model); }

int adaptmc_num_unconstrained(void* model) {
  return static_cast<int>(static_cast<Model*>(model)->base->num_params_r());
}

// Constrained flat names ("theta.1"), newline separated; owned by the model.
const char* adaptmc_constrained_names(void* model, int include_tp, int include_gq) {
  return static_cast<Model*>(model)->names[(include_tp ? 1 : 0) + (include_gq ? 2 : 0)].c_str();
}

// Unconstrained flat names, newline separated; owned by the model.
const char* adaptmc_unconstrained_names(void* model) {
  return static_cast<Model*>(model)->unconstrained.c_str();
}

// "name:d1,d2;..." for parameters, transformed parameters, generated quantities.
const char* adaptmc_variable_shapes(void* model) {
  return static_cast<Model*>(model)->shapes.c_str();
}

// Log density and gradient at `count` points `theta: (count, dim)`, row major. A point the
// model rejects gets lp = -inf and a zero gradient; returns how many were rejected, the
// first one's message in *err.
int adaptmc_log_density_gradient(void* model, int count, const double* theta, double* lp,
                                 double* grad, int propto, int jacobian, char** err) {
  auto& base = *static_cast<Model*>(model)->base;
  const Eigen::Index dim = static_cast<Eigen::Index>(base.num_params_r());
  thread_tape();
  int rejected = 0;
  std::ostringstream msgs;
  for (int i = 0; i < count; ++i) {
    Eigen::Map<const Eigen::VectorXd> point(theta + i * dim, dim);
    Eigen::Map<Eigen::VectorXd> gradient(grad + i * dim, dim);
    try {
      double value = 0;
      Eigen::VectorXd out(dim);
      auto density = [&](Eigen::Matrix<stan::math::var, -1, 1>& x) {
        if (propto) {
          return jacobian ? base.log_prob_propto_jacobian(x, &msgs) : base.log_prob_propto(x, &msgs);
        }
        return jacobian ? base.log_prob_jacobian(x, &msgs) : base.log_prob(x, &msgs);
      };
      stan::math::gradient(density, Eigen::VectorXd(point), value, out);
      lp[i] = value;
      gradient = out;
    } catch (const std::exception& e) {
      lp[i] = -std::numeric_limits<double>::infinity();
      gradient.setZero();
      set_error(err, e.what());
      ++rejected;
    }
  }
  return rejected;
}

// The log density alone at `count` points `theta: (count, dim)` (no reverse pass); a point
// the model rejects gets -inf; returns how many were rejected, the first one's message in
// *err. Dropping constants (`propto`) needs autodiff types: the value is then computed on a
// nested tape that is thrown away.
int adaptmc_log_density(void* model, int count, const double* theta, double* lp, int propto,
                        int jacobian, char** err) {
  auto& base = *static_cast<Model*>(model)->base;
  const Eigen::Index dim = static_cast<Eigen::Index>(base.num_params_r());
  thread_tape();
  int rejected = 0;
  std::ostringstream msgs;
  for (int i = 0; i < count; ++i) {
    Eigen::Map<const Eigen::VectorXd> point(theta + i * dim, dim);
    try {
      if (propto) {
        stan::math::nested_rev_autodiff nested;
        Eigen::Matrix<stan::math::var, -1, 1> x = point.cast<stan::math::var>();
        lp[i] = (jacobian ? base.log_prob_propto_jacobian(x, &msgs)
                          : base.log_prob_propto(x, &msgs)).val();
      } else {
        Eigen::VectorXd x = point;
        lp[i] = jacobian ? base.log_prob_jacobian(x, &msgs) : base.log_prob(x, &msgs);
      }
    } catch (const std::exception& e) {
      lp[i] = -std::numeric_limits<double>::infinity();
      set_error(err, e.what());
      ++rejected;
    }
  }
  return rejected;
}

// Constrained values `out: (count, width)` of `theta: (count, dim)`; `seeds: (count,)` seed
// the random numbers of generated quantities. A failed point is NaN; returns how many.
int adaptmc_constrain(void* model, int count, const double* theta, double* out, int width,
                      int include_tp, int include_gq, const unsigned int* seeds, char** err) {
  auto& base = *static_cast<Model*>(model)->base;
  const Eigen::Index dim = static_cast<Eigen::Index>(base.num_params_r());
  thread_tape();  // double-only code may still differentiate inside (an ODE solver's Jacobian)
  int failed = 0;
  std::ostringstream msgs;
  for (int i = 0; i < count; ++i) {
    Eigen::Map<Eigen::VectorXd> row(out + static_cast<Eigen::Index>(i) * width, width);
    try {
      Eigen::VectorXd point = Eigen::Map<const Eigen::VectorXd>(theta + i * dim, dim);
      Eigen::VectorXd values;
      stan::rng_t rng = stan::services::util::create_rng(seeds[i], 0);
      base.write_array(rng, point, values, include_tp, include_gq, &msgs);
      if (values.size() != width) throw std::length_error("unexpected number of values");
      row = values;
    } catch (const std::exception& e) {
      row.setConstant(std::numeric_limits<double>::quiet_NaN());
      set_error(err, e.what());
      ++failed;
    }
  }
  return failed;
}

// Unconstrained point `out: (dim,)` of the parameters' constrained values `values`.
int adaptmc_unconstrain(void* model, const double* values, double* out, char** err) {
  auto& base = *static_cast<Model*>(model)->base;
  thread_tape();
  try {
    std::vector<std::string> names;
    base.constrained_param_names(names, false, false);
    Eigen::VectorXd constrained = Eigen::Map<const Eigen::VectorXd>(values, names.size());
    Eigen::VectorXd unconstrained;
    base.unconstrain_array(constrained, unconstrained, nullptr);
    Eigen::Map<Eigen::VectorXd>(out, unconstrained.size()) = unconstrained;
    return 0;
  } catch (const std::exception& e) {
    set_error(err, e.what());
  }
  return 1;
}

}  // extern "C"

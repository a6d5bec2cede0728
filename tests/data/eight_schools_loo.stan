// Eight schools (non-centred) with what the Bayesian workflow reads: the pointwise
// log-likelihood `log_lik` (ArviZ's name for LOO), replicated data `y_rep` and a discrete
// generated quantity `best` (the school with the largest effect).
data {
  int<lower=0> J;
  array[J] real y;
  array[J] real<lower=0> sigma;
}
parameters {
  real mu;
  real<lower=0> tau;
  vector[J] theta_trans;
}
transformed parameters {
  vector[J] theta = mu + tau * theta_trans;
}
model {
  theta_trans ~ normal(0, 1);
  y ~ normal(theta, sigma);
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
}
generated quantities {
  vector[J] log_lik;
  array[J] real y_rep = normal_rng(theta, sigma);
  int<lower=1, upper=J> best = sort_indices_desc(theta)[1];
  for (j in 1:J) log_lik[j] = normal_lpdf(y[j] | theta[j], sigma[j]);
}

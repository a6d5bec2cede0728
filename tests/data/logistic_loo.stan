// Logistic regression with its pointwise log-likelihood `log_lik` (for LOO, and for
// predictive tuning: the same program given held-out data evaluates `log_lik` on it).
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] x;
  array[N] int<lower=0, upper=1> y;
}
parameters {
  vector[K] beta;
}
model {
  beta ~ normal(0, 2);
  y ~ bernoulli_logit(x * beta);
}
generated quantities {
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = bernoulli_logit_lpmf(y[n] | x[n] * beta);
}
